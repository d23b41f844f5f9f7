package boltdb

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/storage"
)

// TestWriterCommitsWhileListsAreInProgress holds many Lists halfway
// through their iteration and checks that writes, Gets and new Lists
// complete meanwhile, and that each held List still returns the revision
// it started at. With a reader lock around List (the old design) the
// first write would wait for the held Lists forever.
func TestWriterCommitsWhileListsAreInProgress(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx := context.Background()
	const keys = 100
	for i := range keys {
		if _, err := s.Create(ctx, fmt.Sprintf("/leases/big/l%03d", i), []byte("v0")); err != nil {
			t.Fatal(err)
		}
	}
	startRev, _ := s.CurrentRevision(ctx)

	const readers = 16
	held := make(chan struct{}, readers)
	release := make(chan struct{})
	s.listPause = func() { // once per List, halfway
		held <- struct{}{}
		<-release
	}
	type listed struct {
		res storage.ListResult
		err error
	}
	results := make(chan listed, readers)
	for range readers {
		go func() {
			res, err := s.List(ctx, "/leases/big/", storage.ListOptions{})
			results <- listed{res, err}
		}()
	}
	for range readers {
		<-held
	}
	// Every reader is inside List now. Writes commit, and reads see them.
	s.listPause = nil
	kv, err := s.Update(ctx, "/leases/big/l000", []byte("v1"), startRev-keys+1)
	if err != nil {
		t.Fatalf("Update while Lists are held: %v", err)
	}
	if _, err := s.Create(ctx, "/leases/big/l999", []byte("new")); err != nil {
		t.Fatalf("Create while Lists are held: %v", err)
	}
	if _, _, err := s.Delete(ctx, "/leases/big/l050", 0); err != nil {
		t.Fatalf("Delete while Lists are held: %v", err)
	}
	if got, err := s.Get(ctx, "/leases/big/l000"); err != nil || string(got.Value) != "v1" || got.ModRevision != kv.ModRevision {
		t.Fatalf("Get after the update = %+v, %v; want v1 at %d", got, err, kv.ModRevision)
	}
	now, err := s.List(ctx, "/leases/big/", storage.ListOptions{})
	if err != nil || now.Revision != startRev+3 || now.Count != keys {
		t.Fatalf("a new List = revision %d, %d keys, %v; want %d, %d", now.Revision, now.Count, err, startRev+3, keys)
	}
	close(release)
	for range readers {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.res.Revision != startRev || len(r.res.KVs) != keys || string(r.res.KVs[0].Value) != "v0" || r.res.KVs[50].Key != "/leases/big/l050" {
			t.Fatalf("a held List returned revision %d with %d keys (first %q); want the snapshot at %d", r.res.Revision, len(r.res.KVs), r.res.KVs[0].Value, startRev)
		}
	}
}

// TestIndexMatchesSortedMap drives the persistent index with random puts
// and deletes and checks every version against a plain sorted map,
// including that older versions are left untouched.
func TestIndexMatchesSortedMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type version struct {
		root *inode
		want map[string]int64
	}
	var versions []version
	var root *inode
	want := map[string]int64{}
	for step := range 4000 {
		k := fmt.Sprintf("k%03d", rng.IntN(300))
		if rng.IntN(3) == 0 {
			var removed bool
			root, removed = root.del(k)
			if _, had := want[k]; had != removed {
				t.Fatalf("step %d: del(%s) removed=%v, want %v", step, k, removed, had)
			}
			delete(want, k)
		} else {
			var added bool
			root, added = root.put(storage.KeyValue{Key: k, ModRevision: int64(step)})
			if _, had := want[k]; had == added {
				t.Fatalf("step %d: put(%s) added=%v, map had it: %v", step, k, added, had)
			}
			want[k] = int64(step)
		}
		if step%97 == 0 {
			versions = append(versions, version{root, maps.Clone(want)})
		}
	}
	versions = append(versions, version{root, want})
	for i, v := range versions {
		keys := slices.Sorted(maps.Keys(v.want))
		if v.root.len() != len(keys) {
			t.Fatalf("version %d: len %d, want %d", i, v.root.len(), len(keys))
		}
		var got []string
		v.root.ascend("", "", func(kv *storage.KeyValue) bool {
			if kv.ModRevision != v.want[kv.Key] {
				t.Fatalf("version %d: %s at %d, want %d", i, kv.Key, kv.ModRevision, v.want[kv.Key])
			}
			got = append(got, kv.Key)
			return true
		})
		if !slices.Equal(got, keys) {
			t.Fatalf("version %d: ascend gave %d keys out of order or wrong", i, len(got))
		}
		for range 20 {
			a, b := fmt.Sprintf("k%03d", rng.IntN(310)), fmt.Sprintf("k%03d", rng.IntN(310))
			lo, hi := min(a, b), max(a, b)
			n := 0
			for _, k := range keys {
				if k >= lo && k < hi {
					n++
				}
			}
			if c := v.root.count(lo, hi); c != n {
				t.Fatalf("version %d: count[%s,%s) = %d, want %d", i, lo, hi, c, n)
			}
			var in []string
			v.root.ascend(lo, hi, func(kv *storage.KeyValue) bool { in = append(in, kv.Key); return true })
			if len(in) != n {
				t.Fatalf("version %d: ascend[%s,%s) gave %d keys, want %d", i, lo, hi, len(in), n)
			}
			if _, ok := v.root.get(lo); ok != hasKey(v.want, lo) {
				t.Fatalf("version %d: get(%s) = %v", i, lo, ok)
			}
		}
	}
}

func hasKey(m map[string]int64, k string) bool { _, ok := m[k]; return ok }
