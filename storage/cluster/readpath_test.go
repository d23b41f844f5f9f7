package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/etcd"
)

// TestInProcessReadsAcrossMembers: the read path of members' stores stays
// linearizable, and a leader change does not fail it. A Get through one
// member after a write acknowledged through the other always sees that
// write (a read served from local state, or any cache in front of the
// quorum read, would fail this), while the raft leadership moves between
// the two; no read fails with etcd's "leader changed" (the in-process
// client has no retry interceptor: the store retries such a read, which
// read nothing, as etcd's client does for kube-apiserver). A stale read
// (GetStale) never runs ahead of the linearizable one. A write the
// hand-over made raft drop ("raft proposal dropped": never in the log) is
// sent again, not failed.
func TestInProcessReadsAcrossMembers(t *testing.T) {
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
	members := []*Member{m1, m2}
	for deadline := time.Now().Add(time.Minute); m2.etcd.Server.IsLearner(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("m2 is still a learner a minute after it joined")
		}
	}

	reader, writer := openInProcess(t, m1, "/rp"), openInProcess(t, m2, "/rp")
	kv, err := writer.Create(ctx, "/k", []byte("0"))
	if err != nil {
		t.Fatalf("Create through m2: %v", err)
	}

	// Concurrent readers on m1 keep linearizable reads in flight while the
	// leadership moves (a read waiting for its ReadIndex then is the one
	// etcd ends with "leader changed").
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, leaderChanged atomic.Int64
	var otherErr atomic.Value
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := reader.Get(ctx, "/k")
				reads.Add(1)
				switch {
				case errors.Is(err, rpctypes.ErrLeaderChanged) || errors.Is(err, rpctypes.ErrGRPCLeaderChanged):
					leaderChanged.Add(1)
				case err != nil && !errors.Is(err, rpctypes.ErrNoLeader):
					// "no leader" is the member's fast answer during the
					// hand-over itself (by design; the API retries it).
					otherErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}

	const writes = 60
	for i := 1; i <= writes; i++ {
		if i%10 == 0 {
			moveLeader(ctx, t, members)
		}
		next, err := writer.Update(ctx, "/k", fmt.Appendf(nil, "%d", i), kv.ModRevision)
		if err != nil && strings.Contains(err.Error(), "raft proposal dropped") {
			t.Errorf("write %d failed with etcd's %q: it never reached the log, the store must send it again", i, err)
		}
		if err != nil {
			// The hand-over may end a write with an unknown outcome: read
			// what it left, and go on from there.
			if kv, err = writer.Get(ctx, "/k"); err != nil {
				t.Fatalf("write %d failed and the key cannot be read through m2: %v", i, err)
			}
			continue
		}
		kv = next
		got, err := readRetryingNoLeader(ctx, reader)
		if err != nil {
			t.Fatalf("Get through m1 after write %d was acknowledged through m2: %v", i, err)
		}
		if got.ModRevision < next.ModRevision {
			t.Fatalf("Get through m1 after write %d was acknowledged through m2 at revision %d returned revision %d (%q): a stale read",
				i, next.ModRevision, got.ModRevision, got.Value)
		}
		if stale, err := reader.GetStale(ctx, "/k"); err == nil && stale.ModRevision > got.ModRevision {
			t.Fatalf("GetStale through m1 returned revision %d, ahead of the linearizable read's %d", stale.ModRevision, got.ModRevision)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d concurrent reads through m1 while the leadership moved", reads.Load())
	if n := leaderChanged.Load(); n > 0 {
		t.Errorf("%d reads through m1 failed with etcd's \"leader changed\"; the store must retry them (they read nothing)", n)
	}
	if e := otherErr.Load(); e != nil {
		t.Errorf("a read through m1 failed: %v", e)
	}
}

// moveLeader hands the raft leadership from whichever member holds it to
// the other, retrying while an election is under way.
func moveLeader(ctx context.Context, t *testing.T, members []*Member) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		for _, m := range members {
			if uint64(m.etcd.Server.Leader()) != uint64(m.etcd.Server.MemberID()) {
				continue
			}
			for _, o := range members {
				if o != m {
					_, _, err = m.MoveLeader(ctx, o.cfg.Name)
				}
			}
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leadership did not move within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readRetryingNoLeader is Get, retried while the member has no leader
// (the moment of a hand-over).
func readRetryingNoLeader(ctx context.Context, s *etcd.Store) (storage.KeyValue, error) {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		kv, err := s.Get(ctx, "/k")
		if !errors.Is(err, rpctypes.ErrNoLeader) || time.Now().After(deadline) {
			return kv, err
		}
	}
}
