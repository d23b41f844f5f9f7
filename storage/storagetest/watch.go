package storagetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/storage"
)

func mustWatch(t *testing.T, s storage.Interface, prefix string, since int64) storage.Watcher {
	t.Helper()
	w, err := s.Watch(ctxFor(t), prefix, since)
	if err != nil {
		t.Fatalf("Watch(%q, %d): %v", prefix, since, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// checkOrder verifies strictly increasing revisions and the expected keys.
func checkOrder(t *testing.T, evs []storage.Event, wantKeys []string) {
	t.Helper()
	for i, e := range evs {
		if i > 0 && e.Revision() <= evs[i-1].Revision() {
			t.Fatalf("event %d revision %d not after %d", i, e.Revision(), evs[i-1].Revision())
		}
		if i < len(wantKeys) && e.KV.Key != wantKeys[i] {
			t.Fatalf("event %d key %q, want %q", i, e.KV.Key, wantKeys[i])
		}
	}
}

func testWatchReplayThenLive(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	start := mustRev(t, s)
	var keys []string
	var last storage.KeyValue
	for i := range 5 {
		k := fmt.Sprintf("%sk%d", p, i)
		keys = append(keys, k)
		last = mustCreate(t, s, k, "v")
	}
	w := mustWatch(t, s, p, start)
	for i := 5; i < 10; i++ {
		k := fmt.Sprintf("%sk%d", p, i)
		keys = append(keys, k)
		mustCreate(t, s, k, "v")
	}
	evs := recvEvents(t, w, 10)
	checkOrder(t, evs, keys)
	for _, e := range evs {
		if e.Type != storage.EventPut || e.PrevKV != nil || e.KV.CreateRevision != e.KV.ModRevision {
			t.Fatalf("create event %+v", e)
		}
	}
	// An update carries the previous value.
	upd := mustUpdate(t, s, keys[4], "v2", last.ModRevision)
	e := recvEvents(t, w, 1)[0]
	if e.Type != storage.EventPut || e.PrevKV == nil || string(e.PrevKV.Value) != "v" ||
		e.PrevKV.ModRevision != last.ModRevision || e.KV.ModRevision != upd.ModRevision || string(e.KV.Value) != "v2" {
		t.Fatalf("update event %+v prev %+v", e, e.PrevKV)
	}
	expectQuiet(t, w)

	// Replay from the middle starts right after the given revision.
	w2 := mustWatch(t, s, p, evs[6].Revision())
	evs2 := recvEvents(t, w2, 4)
	checkOrder(t, evs2, append(keys[7:], keys[4]))
	expectQuiet(t, w2)
}

func testWatchPrefixFilter(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	wa := mustWatch(t, s, p+"a/", 0)
	wab := mustWatch(t, s, p+"ab/", 0)
	mustCreate(t, s, p+"ab/1", "x")
	mustCreate(t, s, p+"a/1", "x")
	mustCreate(t, s, p+"a", "x")
	mustCreate(t, s, p+"ab/2", "x")
	checkOrder(t, recvEvents(t, wa, 1), []string{p + "a/1"})
	checkOrder(t, recvEvents(t, wab, 2), []string{p + "ab/1", p + "ab/2"})
	expectQuiet(t, wa)
	expectQuiet(t, wab)
}

func testWatchDeleteEvents(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	kv := mustCreate(t, s, p+"k", "v")
	w := mustWatch(t, s, p, kv.ModRevision)
	_, rev, err := s.Delete(ctxFor(t), p+"k", kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	e := recvEvents(t, w, 1)[0]
	if e.Type != storage.EventDelete || e.KV.Key != p+"k" || e.KV.ModRevision != rev || e.KV.Value != nil {
		t.Fatalf("delete event %+v", e)
	}
	if e.PrevKV == nil || string(e.PrevKV.Value) != "v" || e.PrevKV.ModRevision != kv.ModRevision || e.PrevKV.CreateRevision != kv.CreateRevision {
		t.Fatalf("delete event PrevKV %+v", e.PrevKV)
	}
	// The same delete replayed from history looks the same.
	w2 := mustWatch(t, s, p, kv.ModRevision)
	e2 := recvEvents(t, w2, 1)[0]
	if e2.Type != storage.EventDelete || e2.PrevKV == nil || string(e2.PrevKV.Value) != "v" || e2.Revision() != rev {
		t.Fatalf("replayed delete event %+v", e2)
	}
}

func testWatchFromNow(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	mustCreate(t, s, p+"old", "x")
	w := mustWatch(t, s, p, 0)
	expectQuiet(t, w)
	n := mustCreate(t, s, p+"new", "x")
	evs := recvEvents(t, w, 1)
	if evs[0].KV.Key != p+"new" || evs[0].Revision() != n.ModRevision {
		t.Fatalf("watch from now got %+v", evs[0])
	}
}

func testWatchProgress(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	w := mustWatch(t, s, p, 0)
	// A write outside the prefix still advances the revision.
	other := mustCreate(t, s, p[:len(p)-1]+"-other/x", "x")
	expectQuiet(t, w)
	w.RequestProgress()
	resp := recv(t, w)
	if resp.Err != nil || len(resp.Events) != 0 || resp.Revision < other.ModRevision {
		t.Fatalf("progress response %+v, want revision >= %d", resp, other.ModRevision)
	}
	// Progress comes after everything already queued.
	kv := mustCreate(t, s, p+"k", "x")
	w.RequestProgress()
	first := recv(t, w)
	if len(first.Events) != 1 || first.Events[0].Revision() != kv.ModRevision {
		t.Fatalf("expected the event before the progress notification, got %+v", first)
	}
	prog := recv(t, w)
	if len(prog.Events) != 0 || prog.Revision < kv.ModRevision {
		t.Fatalf("progress after event: %+v", prog)
	}
}

func testWatchStopAndCancel(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	w := mustWatch(t, s, p, 0)
	w.Stop()
	w.Stop() // idempotent
	expectClosed(t, w)

	ctx, cancel := context.WithCancel(context.Background())
	w2, err := s.Watch(ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, p+"k", "x")
	recvEvents(t, w2, 1)
	cancel()
	expectClosed(t, w2)
	w2.Stop() // after the end: still safe
	// The store keeps working for others.
	w3 := mustWatch(t, s, p, 0)
	mustCreate(t, s, p+"k2", "x")
	recvEvents(t, w3, 1)
}
