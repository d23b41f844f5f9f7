package storagetest

import (
	"testing"

	"github.com/leasehold/leasehold/storage"
)

func mustList(t *testing.T, s storage.Interface, prefix string, opts storage.ListOptions) storage.ListResult {
	t.Helper()
	res, err := s.List(ctxFor(t), prefix, opts)
	if err != nil {
		t.Fatalf("List(%q, %+v): %v", prefix, opts, err)
	}
	return res
}

func keysOf(kvs []storage.KeyValue) []string {
	keys := make([]string, len(kvs))
	for i, kv := range kvs {
		keys[i] = kv.Key
	}
	return keys
}

func sameKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testListPaging(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	var want []string
	for _, k := range []string{"e", "a", "d", "b", "c"} { // out of order on purpose
		mustCreate(t, s, p+k, "v"+k)
	}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		want = append(want, p+k)
	}
	all := mustList(t, s, p, storage.ListOptions{})
	if !sameKeys(keysOf(all.KVs), want) || all.Count != 5 || all.More {
		t.Fatalf("List all: keys %v count %d more %v", keysOf(all.KVs), all.Count, all.More)
	}
	if all.Revision != mustRev(t, s) {
		t.Fatalf("List revision %d, current %d", all.Revision, mustRev(t, s))
	}
	for _, kv := range all.KVs {
		if string(kv.Value) != "v"+kv.Key[len(p):] {
			t.Fatalf("List value %q for %q", kv.Value, kv.Key)
		}
	}

	page := mustList(t, s, p, storage.ListOptions{Limit: 2})
	if !sameKeys(keysOf(page.KVs), want[:2]) || page.Count != 5 || !page.More {
		t.Fatalf("page 1: keys %v count %d more %v", keysOf(page.KVs), page.Count, page.More)
	}
	snap := page.Revision

	// Writes between pages must not leak into a list pinned at snap.
	c, err := s.Get(ctxFor(t), p+"c")
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, p+"c", "changed", c.ModRevision)
	mustCreate(t, s, p+"bb", "new")

	page = mustList(t, s, p, storage.ListOptions{Limit: 2, StartKey: want[1] + "\x00", Revision: snap})
	if !sameKeys(keysOf(page.KVs), want[2:4]) || page.Count != 3 || !page.More || page.Revision != snap {
		t.Fatalf("page 2: keys %v count %d more %v rev %d", keysOf(page.KVs), page.Count, page.More, page.Revision)
	}
	if string(page.KVs[0].Value) != "vc" {
		t.Fatalf("page 2 at %d sees value %q written later", snap, page.KVs[0].Value)
	}
	page = mustList(t, s, p, storage.ListOptions{Limit: 2, StartKey: want[4], Revision: snap})
	if !sameKeys(keysOf(page.KVs), want[4:]) || page.Count != 1 || page.More {
		t.Fatalf("page 3: keys %v count %d more %v", keysOf(page.KVs), page.Count, page.More)
	}

	// Exact limit: no More.
	page = mustList(t, s, p, storage.ListOptions{Limit: 6})
	if len(page.KVs) != 6 || page.More || page.Count != 6 {
		t.Fatalf("limit = size: %d keys more %v count %d", len(page.KVs), page.More, page.Count)
	}
	// Empty prefix range.
	empty := mustList(t, s, p+"zzz/", storage.ListOptions{})
	if len(empty.KVs) != 0 || empty.Count != 0 || empty.More {
		t.Fatalf("empty range: %+v", empty)
	}
}

func testListPrefixIsolation(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	mustCreate(t, s, p+"a/1", "x")
	mustCreate(t, s, p+"a/2", "x")
	mustCreate(t, s, p+"ab/1", "x")
	mustCreate(t, s, p+"a", "x")
	mustCreate(t, s, p+"b/1", "x")
	res := mustList(t, s, p+"a/", storage.ListOptions{})
	if got := keysOf(res.KVs); !sameKeys(got, []string{p + "a/1", p + "a/2"}) || res.Count != 2 {
		t.Fatalf("List %q: %v (count %d)", p+"a/", got, res.Count)
	}
	res = mustList(t, s, p+"ab/", storage.ListOptions{})
	if got := keysOf(res.KVs); !sameKeys(got, []string{p + "ab/1"}) {
		t.Fatalf("List %q: %v", p+"ab/", got)
	}
	res = mustList(t, s, p, storage.ListOptions{})
	if res.Count != 5 {
		t.Fatalf("List %q: count %d, want 5: %s", p, res.Count, describe(res.KVs))
	}
}

// testListAtRevision reads the historic snapshots of a small scripted past.
func testListAtRevision(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	k1 := mustCreate(t, s, p+"k1", "a")                  // r1
	k1b := mustUpdate(t, s, p+"k1", "b", k1.ModRevision) // r2
	k2 := mustCreate(t, s, p+"k2", "c")                  // r3
	_, r4, err := s.Delete(ctx, p+"k1", 0)               // r4
	if err != nil {
		t.Fatal(err)
	}
	k3 := mustCreate(t, s, p+"k3", "d") // r5

	cases := []struct {
		rev  int64
		want string
	}{
		{k1.ModRevision, describe([]storage.KeyValue{k1})},
		{k1b.ModRevision, describe([]storage.KeyValue{k1b})},
		{k2.ModRevision, describe([]storage.KeyValue{k1b, k2})},
		{r4, describe([]storage.KeyValue{k2})},
		{k3.ModRevision, describe([]storage.KeyValue{k2, k3})},
		{0, describe([]storage.KeyValue{k2, k3})},
	}
	for _, c := range cases {
		res := mustList(t, s, p, storage.ListOptions{Revision: c.rev})
		if got := describe(res.KVs); got != c.want || res.Count != int64(len(res.KVs)) {
			t.Errorf("List at %d: %s(count %d), want %s", c.rev, got, res.Count, c.want)
		}
		if c.rev != 0 && res.Revision != c.rev {
			t.Errorf("List at %d reports revision %d", c.rev, res.Revision)
		}
	}
	// Paging works at historic revisions too.
	res := mustList(t, s, p, storage.ListOptions{Revision: k2.ModRevision, Limit: 1})
	if got := keysOf(res.KVs); !sameKeys(got, []string{p + "k1"}) || !res.More || res.Count != 2 {
		t.Fatalf("historic page: %v more %v count %d", got, res.More, res.Count)
	}
	res = mustList(t, s, p, storage.ListOptions{Revision: k2.ModRevision, StartKey: p + "k1\x00"})
	if got := keysOf(res.KVs); !sameKeys(got, []string{p + "k2"}) || res.More || res.Count != 1 {
		t.Fatalf("historic page 2: %v more %v count %d", got, res.More, res.Count)
	}
}

func testCompactedAndFuture(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	a := mustCreate(t, s, p+"a", "1")
	b := mustUpdate(t, s, p+"a", "2", a.ModRevision)
	mustUpdate(t, s, p+"a", "3", b.ModRevision)
	cur := mustRev(t, s)

	_, err := s.List(ctx, p, storage.ListOptions{Revision: cur + 1000})
	wantErr(t, "List at future revision", err, storage.ErrFutureRevision)

	if err := s.Compact(ctx, b.ModRevision); err != nil {
		t.Fatalf("Compact(%d): %v", b.ModRevision, err)
	}
	cr, err := s.CompactRevision(ctx)
	if err != nil || cr < b.ModRevision {
		t.Fatalf("CompactRevision = %d, %v; want >= %d", cr, err, b.ModRevision)
	}
	_, err = s.List(ctx, p, storage.ListOptions{Revision: a.ModRevision})
	wantErr(t, "List at compacted revision", err, storage.ErrCompacted)
	_, err = s.Watch(ctx, p, a.ModRevision)
	wantErr(t, "Watch from compacted revision", err, storage.ErrCompacted)

	// The compact revision itself stays readable and watchable.
	res := mustList(t, s, p, storage.ListOptions{Revision: b.ModRevision})
	if len(res.KVs) != 1 || string(res.KVs[0].Value) != "2" {
		t.Fatalf("List at compact revision: %s", describe(res.KVs))
	}
	w, err := s.Watch(ctx, p, b.ModRevision)
	if err != nil {
		t.Fatalf("Watch from compact revision: %v", err)
	}
	defer w.Stop()
	evs := recvEvents(t, w, 1)
	if string(evs[0].KV.Value) != "3" {
		t.Fatalf("replayed %q, want 3", evs[0].KV.Value)
	}
}
