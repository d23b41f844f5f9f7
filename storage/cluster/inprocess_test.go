package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/etcd"
	"github.com/leasehold/leasehold/storage/storagetest"
)

// openInProcess opens the store as serve opens a member's (the
// in-process client, bounded requests that need a leader, watches that
// end without one), with a request bound long enough for a loaded
// machine (see TestConformanceOnEmbeddedMember).
func openInProcess(t testing.TB, m *Member, prefix string, tweak ...func(*etcd.Options)) *etcd.Store {
	t.Helper()
	opts := etcd.Options{
		Endpoints: []string{"in-process:" + m.ClientURL()}, Client: m.StoreClient(), Prefix: prefix,
		CompactInterval: -1, RequestTimeout: 30 * time.Second, EndWatchesWithoutLeader: true,
		WatchQueueLimit: storagetest.SlowWatcherWrites / 4, Logger: slog.New(slog.DiscardHandler),
	}
	for _, f := range tweak {
		f(&opts)
	}
	s, err := etcd.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformanceInProcess runs the storage contract suite on the etcd
// backend over the member's in-process client, as serve opens a member's
// store.
func TestConformanceInProcess(t *testing.T) {
	m, _ := startMember(t, t.TempDir())
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		return openInProcess(t, m, "/conformance")
	})
}

// TestInProcessWithoutLeader: the in-process client keeps what etcd's
// interceptors give the network path. A member that lost its quorum fails
// a read or write of its store with "no leader" at once (not after the
// request bound: a client-go elector on the device must learn it in
// time), and its store's watches end (the API's watchers relist
// elsewhere). A write made through the store is visible through the
// other member first (one raft log).
func TestInProcessWithoutLeader(t *testing.T) {
	ctx := context.Background()
	ca := newTestCA(t, "test-ca")
	c1 := memberConfig(t, ca, t.TempDir(), "m1", nil)
	m1, err := Start(ctx, c1)
	if err != nil {
		t.Fatalf("Start m1: %v", err)
	}
	defer m1.Close()
	c2 := memberConfig(t, ca, t.TempDir(), "m2", nil)
	m2 := joinMember(ctx, t, m1, &c2)
	defer m2.Close()

	s := openInProcess(t, m1, "/inproc")
	kv, err := s.Create(ctx, "/k", []byte("v1"))
	if err != nil {
		t.Fatalf("Create through the in-process client: %v", err)
	}
	resp, err := m2.client.Get(ctx, "/inproc/k") // linearizable, through m2's client port
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" || resp.Kvs[0].ModRevision != kv.ModRevision {
		t.Fatalf("m2 reads %v, %v; want v1 at revision %d", resp, err, kv.ModRevision)
	}
	w, err := s.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()

	m2.Close()
	for deadline := time.Now().Add(time.Minute); m1.HasLeader(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("m1 still has a leader a minute after the other of its two members stopped")
		}
	}
	if _, err := s.Get(ctx, "/k"); !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Errorf("Get without a leader = %v, want etcd's \"no leader\" at once (not %v after the request bound)", err, storage.ErrTimeout)
	}
	if _, err := s.Update(ctx, "/k", []byte("v2"), kv.ModRevision); !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Errorf("Update without a leader = %v, want etcd's \"no leader\" at once", err)
	}
	select {
	case r, ok := <-w.ResultChan():
		if ok && r.Err == nil {
			t.Errorf("the watch delivered %+v without a leader; want it ended with an error", r)
		}
		t.Logf("the watch ended: %v", r.Err)
	case <-time.After(time.Minute):
		t.Error("the store's watch did not end within a minute of its member losing the leader (etcd ends such streams after three election timeouts)")
	}
}

// TestLargeWritesPaced: values over LargeValueBytes share a byte rate
// (the burst holds the largest value); one that cannot have its turn
// before its context ends fails with a timeout and is not written, while
// small values (renewals) are never held.
func TestLargeWritesPaced(t *testing.T) {
	m, _ := startMember(t, t.TempDir())
	s := openInProcess(t, m, "/paced", func(o *etcd.Options) {
		o.MaxValueBytes, o.LargeValueBytes, o.LargeWriteBytesPerSec = 128<<10, 64<<10, 1<<10 // 1 KiB/s: a second large value waits minutes
	})
	big := make([]byte, 100<<10)
	ctx := context.Background()
	if _, err := s.Create(ctx, "/big-1", big); err != nil {
		t.Fatalf("the first large value (within the burst): %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.Create(short, "/big-2", big); !errors.Is(err, storage.ErrTimeout) {
		t.Errorf("a second large value at once = %v, want a timeout before it is sent (its turn is minutes away)", err)
	}
	if _, err := s.Get(ctx, "/big-2"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the refused large value: Get = %v, want not found (it must not have been sent)", err)
	}
	for i := range 50 {
		if _, err := s.Create(short, fmt.Sprintf("/small-%d", i), make([]byte, 1<<10)); err != nil {
			t.Fatalf("a small value behind the large ones: %v", err)
		}
	}
}
