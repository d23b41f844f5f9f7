package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/etcd/etcdtest"
)

// TestReplicasShareOneStore: two stores (two replicas' clients) on one
// cluster see each other's writes at once, detect each other's conflicts
// through revisions, and watch each other's changes.
func TestReplicasShareOneStore(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := open(t, c.Endpoints(), Options{Prefix: "/shared"})
	b := open(t, c.Endpoints(), Options{Prefix: "/shared"})
	other := open(t, c.Endpoints(), Options{Prefix: "/other-installation"})
	ctx := context.Background()

	w, err := b.Watch(ctx, "/k/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	kv, err := a.Create(ctx, "/k/x", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, "/k/x")
	if err != nil || string(got.Value) != "1" || got.ModRevision != kv.ModRevision {
		t.Fatalf("b.Get after a.Create: %+v, %v", got, err)
	}
	if _, err := other.Get(ctx, "/k/x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another prefix sees the key: %v", err)
	}
	if _, err := b.Update(ctx, "/k/x", []byte("2b"), kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Update(ctx, "/k/x", []byte("2a"), kv.ModRevision); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale update through the other replica: %v, want ErrConflict", err)
	}
	if _, err := b.Create(ctx, "/k/x", []byte("again")); !errors.Is(err, storage.ErrKeyExists) {
		t.Fatalf("create through the other replica: %v, want ErrKeyExists", err)
	}
	var seen []string
	for len(seen) < 2 {
		select {
		case resp := <-w.ResultChan():
			if resp.Err != nil {
				t.Fatal(resp.Err)
			}
			for _, e := range resp.Events {
				seen = append(seen, string(e.KV.Value))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watch through b saw %v", seen)
		}
	}
	if strings.Join(seen, ",") != "1,2b" {
		t.Fatalf("watch through b saw %v, want 1,2b", seen)
	}
	st, err := a.Stats(ctx)
	if err != nil || st.Backend != "etcd" || st.Keys != 1 || st.Revision < kv.ModRevision || st.SizeBytes <= 0 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
}

// TestValueLimitAndUnreachable: oversized values fail with
// ErrValueTooLarge, and Open reports an unreachable cluster quickly.
func TestValueLimitAndUnreachable(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := open(t, c.Endpoints(), Options{MaxValueBytes: 1000})
	ctx := context.Background()
	if _, err := s.Create(ctx, "/big", make([]byte, 1001)); !errors.Is(err, storage.ErrValueTooLarge) {
		t.Fatalf("oversized create: %v", err)
	}
	kv, err := s.Create(ctx, "/big", make([]byte, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "/big", make([]byte, 1001), kv.ModRevision); !errors.Is(err, storage.ErrValueTooLarge) {
		t.Fatalf("oversized update: %v", err)
	}
	// etcd's own request limit maps to the same error.
	unlimited := open(t, c.Endpoints(), Options{MaxValueBytes: 8 << 20})
	if _, err := unlimited.Create(ctx, "/huge", make([]byte, 1600<<10)); !errors.Is(err, storage.ErrValueTooLarge) {
		t.Fatalf("create above etcd's request limit: %v", err)
	}

	// DialTimeout bounds Open: the 500 ms given, not the 5 s default
	// (bounded by the default, so that a loaded machine passes).
	start := time.Now()
	_, err = Open(ctx, Options{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 500 * time.Millisecond, Logger: quietLogger})
	if took := time.Since(start); err == nil || took >= 5*time.Second {
		t.Fatalf("Open on a closed port with a 500ms DialTimeout: %v after %v, want an error before the 5s default", err, took)
	}
}

// TestCompactor: the periodic compactor of several replicas compacts the
// cluster and keeps at least one interval of history.
func TestCompactor(t *testing.T) {
	c := etcdtest.Start(t, 1)
	const interval = 300 * time.Millisecond
	a := open(t, c.Endpoints(), Options{CompactInterval: interval})
	open(t, c.Endpoints(), Options{CompactInterval: interval}) // a second replica takes turns
	ctx := context.Background()
	first, err := a.Create(ctx, "/c", []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	kv := first
	deadline := time.Now().Add(10 * time.Second)
	for {
		if kv, err = a.Update(ctx, "/c", []byte(fmt.Sprint(kv.ModRevision)), kv.ModRevision); err != nil {
			t.Fatal(err)
		}
		cr, err := a.CompactRevision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cr > first.ModRevision {
			// History of the last interval is still there.
			recent := kv.ModRevision - 1
			if _, err := a.List(ctx, "/", storage.ListOptions{Revision: recent}); err != nil {
				t.Fatalf("list at %d (compacted at %d): %v", recent, cr, err)
			}
			if _, err := a.Watch(ctx, "/", first.ModRevision); !errors.Is(err, storage.ErrCompacted) {
				t.Fatalf("watch from %d after compaction at %d: %v", first.ModRevision, cr, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction after 10s (compact revision %d)", cr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createRetrying creates key, retrying errors that leave the outcome
// unknown (a timeout while the cluster elects a new leader) as a client
// would: a retry that finds the key reads the revision it got.
func createRetrying(ctx context.Context, s *Store, key string) (int64, error) {
	for {
		kv, err := s.Create(ctx, key, []byte("x"))
		if errors.Is(err, storage.ErrKeyExists) {
			kv, err = s.Get(ctx, key)
		}
		if err == nil {
			return kv.ModRevision, nil
		}
		if ctx.Err() != nil {
			return 0, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWatchAcrossMemberLoss: a watch keeps delivering every event, in
// order and without duplicates, while the cluster's leader is killed;
// writes continue on the remaining quorum.
func TestWatchAcrossMemberLoss(t *testing.T) {
	c := etcdtest.Start(t, 3)
	// The leader is killed: the cluster elects another while the watch and
	// the writes move to the survivors.
	leader := c.Leader(t)
	watcherStore := open(t, c.Endpoints(), Options{})
	writer := open(t, c.Endpoints(), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := watcherStore.Watch(ctx, "/m/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	const writes = 200
	var wg sync.WaitGroup
	revs := make(chan int64, writes)
	wg.Go(func() {
		defer close(revs)
		for i := range writes {
			if i == writes/4 {
				leader.Kill()
			}
			rev, err := createRetrying(ctx, writer, fmt.Sprintf("/m/%03d", i))
			if err != nil {
				t.Errorf("write %d: %v", i, err)
				return
			}
			revs <- rev
		}
	})
	var got []int64
	for len(got) < writes {
		select {
		case resp, ok := <-w.ResultChan():
			if !ok || resp.Err != nil {
				t.Fatalf("watch ended after %d events: %v", len(got), resp.Err)
			}
			for _, e := range resp.Events {
				got = append(got, e.Revision())
			}
		case <-ctx.Done():
			t.Fatalf("watch delivered %d of %d events", len(got), writes)
		}
	}
	wg.Wait()
	i := 0
	for rev := range revs {
		if got[i] != rev {
			t.Fatalf("event %d has revision %d, write had %d", i, got[i], rev)
		}
		i++
	}
}
