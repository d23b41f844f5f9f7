package history

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestDrainRecords: a drain is kept per namespace and identity (any
// characters), draining twice keeps the first author, undrain returns
// what it removed, and listing is per namespace or for all.
func TestDrainRecords(t *testing.T) {
	env := newTestStore(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id := "host/1_a b%"
	rec, created, err := env.Drain(ctx, DrainRecord{Namespace: "edge", Identity: id, By: "alice", Time: at, Via: "leasehold drain"})
	if err != nil || !created || rec.By != "alice" {
		t.Fatalf("first drain: %+v created=%v err=%v, want alice's record created", rec, created, err)
	}
	rec, created, err = env.Drain(ctx, DrainRecord{Namespace: "edge", Identity: id, By: "bob", Time: at.Add(time.Minute)})
	if err != nil || created || rec.By != "alice" || !rec.Time.Equal(at) {
		t.Fatalf("second drain: %+v created=%v err=%v, want alice's record kept", rec, created, err)
	}
	if _, _, err := env.Drain(ctx, DrainRecord{Namespace: "other", Identity: "x", By: "carol", Time: at}); err != nil {
		t.Fatal(err)
	}
	got, found, err := env.DrainOf(ctx, "edge", id)
	if err != nil || !found || got.Identity != id || got.Via != "leasehold drain" {
		t.Fatalf("DrainOf: %+v found=%v err=%v", got, found, err)
	}
	if _, found, _ := env.DrainOf(ctx, "edge", "x"); found {
		t.Fatal("edge/x is drained, but only other/x was")
	}
	edge, err := env.Drains(ctx, "edge")
	if err != nil || len(edge) != 1 || edge[0].Identity != id {
		t.Fatalf("Drains(edge) = %+v, %v; want only %q", edge, err, id)
	}
	all, err := env.Drains(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("Drains(all) = %+v, %v; want 2", all, err)
	}
	rec, found, err = env.Undrain(ctx, "edge", id)
	if err != nil || !found || rec.By != "alice" {
		t.Fatalf("Undrain: %+v found=%v err=%v", rec, found, err)
	}
	if _, found, err := env.Undrain(ctx, "edge", id); err != nil || found {
		t.Fatalf("second Undrain: found=%v err=%v, want nothing to undrain", found, err)
	}
	for _, bad := range []struct{ ns, id string }{{"", "x"}, {"a/b", "x"}, {"ns", ""}, {"ns", string(make([]byte, MaxIdentityBytes+1))}} {
		if _, _, err := env.Drain(ctx, DrainRecord{Namespace: bad.ns, Identity: bad.id}); err == nil {
			t.Errorf("Drain(%q, %d bytes) succeeded, want refused", bad.ns, len(bad.id))
		}
	}
}

// TestWatchDrains: the watcher gets the existing records, then each drain
// and undrain as it happens.
func TestWatchDrains(t *testing.T) {
	env := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := env.Drain(ctx, DrainRecord{Namespace: "ns", Identity: "before", By: "a", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	set := map[string]bool{}
	var done sync.WaitGroup
	done.Go(func() {
		env.WatchDrains(ctx, func(recs []DrainRecord) {
			mu.Lock()
			defer mu.Unlock()
			clear(set)
			for _, r := range recs {
				set[r.Namespace+"/"+r.Identity] = true
			}
		}, func(r DrainRecord, deleted bool) {
			mu.Lock()
			defer mu.Unlock()
			if deleted {
				delete(set, r.Namespace+"/"+r.Identity)
			} else {
				set[r.Namespace+"/"+r.Identity] = true
			}
		})
	})
	waitSet := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			ok := len(set) == len(want)
			for _, w := range want {
				ok = ok && set[w]
			}
			got := len(set)
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the watcher holds %d drains, want %v", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSet("ns/before")
	if _, _, err := env.Drain(ctx, DrainRecord{Namespace: "ns", Identity: "a/b", By: "a", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	waitSet("ns/before", "ns/a/b")
	if _, _, err := env.Undrain(ctx, "ns", "before"); err != nil {
		t.Fatal(err)
	}
	waitSet("ns/a/b")
	cancel()
	done.Wait()
}
