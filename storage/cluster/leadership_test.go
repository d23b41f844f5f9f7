package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// TestLeadershipOnOneMember: the probes measure a quorum round trip, a
// lone member never finds its own leadership slow, and move-leader names
// what stops it: an unknown member (404), no other member to take over
// (try again), the leader itself (nothing to do).
func TestLeadershipOnOneMember(t *testing.T) {
	m, ms, _ := trustMember(t)
	ctx := context.Background()
	m.WatchLeadership(func(context.Context) (string, error) { return "m1/1/x", nil }, true)
	deadline := time.Now().Add(30 * time.Second)
	for m.QuorumRoundTrip() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no quorum round trip measured within 30s of probes every second")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := m.Slow(); s != nil {
		t.Errorf("a lone member finds the leader slow: %+v", *s)
	}
	st, err := ms.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.SlowLeader != nil || st.QuorumRoundTripMs < 0 {
		t.Errorf("Status = slow leader %+v, quorum round trip %dms; want none and a measured round trip", st.SlowLeader, st.QuorumRoundTripMs)
	}
	if _, err := ms.MoveLeader(ctx, "nobody"); !errors.Is(err, clusterapi.ErrNoSuchMember) {
		t.Errorf("MoveLeader(nobody) = %v, want ErrNoSuchMember", err)
	}
	if _, err := ms.MoveLeader(ctx, ""); !errors.Is(err, clusterapi.ErrTryAgain) {
		t.Errorf("MoveLeader() on a lone member = %v, want ErrTryAgain (no other member)", err)
	}
	resp, err := ms.MoveLeader(ctx, "m1")
	if err != nil || resp.From != "m1" || resp.To != "m1" {
		t.Errorf("MoveLeader(m1) on its leader = %+v, %v; want from m1 to m1, no error", resp, err)
	}
	if !m.HasLeader() {
		t.Error("the member lost its leadership")
	}
}

// startThree runs a three-member cluster (m1, then m2 and m3 joined
// through it) and waits until all three vote.
func startThree(ctx context.Context, t *testing.T) []*Member {
	t.Helper()
	ca := newTestCA(t, "test-ca")
	c1 := memberConfig(t, ca, t.TempDir(), "m1", nil)
	m1, err := Start(ctx, c1)
	if err != nil {
		t.Fatalf("Start m1: %v", err)
	}
	t.Cleanup(m1.Close)
	members := []*Member{m1}
	for _, name := range []string{"m2", "m3"} {
		c := memberConfig(t, ca, t.TempDir(), name, nil)
		recordMember(t, m1, c)
		// etcd refuses a member while the last one it added is not yet
		// active ("unhealthy cluster"): ask again.
		var ad Admitted
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			if ad, err = m1.AddLearner(ctx, c.Name, c.AdvertisePeer); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("add %s as a learner: %v", name, err)
			}
		}
		c.InitialCluster, c.Join = ad.InitialCluster, true
		m, err := Start(ctx, c)
		if err != nil {
			t.Fatalf("join %s: %v", name, err)
		}
		t.Cleanup(m.Close)
		for deadline := time.Now().Add(time.Minute); m.etcd.Server.IsLearner(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is still a learner a minute after it joined", name)
			}
		}
		members = append(members, m)
	}
	return members
}

// leaderOf is the member of members that leads, nil during an election.
func leaderOf(members []*Member) *Member {
	for _, m := range members {
		if m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			return m
		}
	}
	return nil
}

// TestMoveLeaderUnderWrites: a move asked for by a follower (over the
// leader's client port) and one asked for on the leader (in process)
// complete while writers keep proposals coming through every member, the
// leader's own included; no write fails with "raft proposal dropped" (the
// leader drops proposals while its transfer is under way, and the move
// asks for the transfer again and again: the stores hold such writes and
// send them again); and two moves at once to different members both end
// (a follower's move off a slow leader is done once anyone else leads,
// the operator's once its member leads) instead of aborting each other's
// transfers until both give up; and a follower's election off the leader
// (electOffSlow, a move off a slow leader) elects another leader at once.
func TestMoveLeaderUnderWrites(t *testing.T) {
	ctx := context.Background()
	members := startThree(ctx, t)
	var lead *Member
	for deadline := time.Now().Add(30 * time.Second); lead == nil; time.Sleep(50 * time.Millisecond) {
		if lead = leaderOf(members); lead == nil && time.Now().After(deadline) {
			t.Fatal("no leader within 30s of the cluster's start")
		}
	}

	// The probes (no election controller, no automatic move) fill in
	// which members answer.
	for _, m := range members {
		m.WatchLeadership(nil, false)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes, dropped atomic.Int64
	var otherErr atomic.Value
	for i, m := range members {
		s := openInProcess(t, m, "/move")
		for w := range 2 {
			key := fmt.Sprintf("/k%d-%d", i, w)
			kv, err := s.Create(ctx, key, []byte("0"))
			if err != nil {
				t.Fatalf("Create %s through %s: %v", key, m.Name(), err)
			}
			wg.Go(func() {
				for n := 1; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					next, err := s.Update(ctx, key, fmt.Appendf(nil, "%d", n), kv.ModRevision)
					writes.Add(1)
					switch {
					case err == nil:
						kv = next
						continue
					case strings.Contains(err.Error(), "raft proposal dropped"):
						dropped.Add(1)
					case !errors.Is(err, storage.ErrTimeout) && !errors.Is(err, storage.ErrConflict):
						// A write the leader change ended has an unknown
						// outcome (504), by design, and the next one may
						// then conflict; anything else is a failure.
						otherErr.CompareAndSwap(nil, err.Error())
					}
					if cur, err := s.Get(ctx, key); err == nil {
						kv = cur
					}
				}
			})
		}
	}
	stopWriters := sync.OnceFunc(func() { close(stop) })
	defer func() {
		stopWriters()
		wg.Wait()
		t.Logf("%d writes while the leadership moved", writes.Load())
		if n := dropped.Load(); n > 0 {
			t.Errorf("%d writes failed with etcd's \"raft proposal dropped\"; the store must hold and resend them", n)
		}
		if e := otherErr.Load(); e != nil {
			t.Errorf("a write failed: %v", e)
		}
	}()
	time.Sleep(500 * time.Millisecond) // the writers under way

	// A follower moves the leadership to itself.
	var follower *Member
	for _, m := range members {
		if m != lead {
			follower = m
			break
		}
	}
	began := time.Now()
	if _, err := follower.moveLeaderTo(ctx, []uint64{uint64(follower.etcd.Server.MemberID())}, false); err != nil {
		t.Fatalf("%s moving the leadership from %s to itself under writes: %v", follower.Name(), lead.Name(), err)
	}
	t.Logf("%s took the leadership from %s in %v", follower.Name(), lead.Name(), time.Since(began).Round(time.Millisecond))

	// The leader hands it on in process.
	lead = follower
	var next *Member
	for _, m := range members {
		if m != lead {
			next = m
			break
		}
	}
	began = time.Now()
	if from, to, err := lead.MoveLeader(ctx, next.Name()); err != nil || from != lead.Name() || to != next.Name() {
		t.Fatalf("MoveLeader(%s) on the leader %s = %s, %s, %v; want from %s to %s", next.Name(), lead.Name(), from, to, err, lead.Name(), next.Name())
	}
	t.Logf("%s handed the leadership to %s in %v", lead.Name(), next.Name(), time.Since(began).Round(time.Millisecond))

	// Both followers move it at once: the operator's move to one of them
	// (a target) and an automatic one by the other (off the leader, to
	// whichever healthy follower catches up first, itself asked first).
	lead = next
	var a, b *Member
	for _, m := range members {
		switch {
		case m == lead:
		case a == nil:
			a = m
		default:
			b = m
		}
	}
	errs := make(chan error, 2)
	go func() {
		_, _, err := a.MoveLeader(ctx, a.Name())
		errs <- err
	}()
	self, leadID := uint64(b.etcd.Server.MemberID()), uint64(lead.etcd.Server.MemberID())
	var targets []uint64
	for deadline := time.Now().Add(30 * time.Second); len(targets) < 2; time.Sleep(100 * time.Millisecond) {
		if targets = b.leadership.healthyFollowers(self, leadID); len(targets) < 2 && time.Now().After(deadline) {
			t.Fatalf("%s's healthy followers besides the leader %s = %x, want itself and %s (every member answers its probes)", b.Name(), lead.Name(), targets, a.Name())
		}
	}
	if want := []uint64{self, uint64(a.etcd.Server.MemberID())}; !slices.Equal(targets, want) {
		t.Fatalf("%s's healthy followers = %x, want %x (itself first, then %s; not the leader %s)", b.Name(), targets, want, a.Name(), lead.Name())
	}
	go func() {
		_, err := b.moveLeaderTo(ctx, targets, true)
		errs <- err
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("two moves off %s at once (%s's to itself, %s's off the leader): %v", lead.Name(), a.Name(), b.Name(), err)
		}
	}
	if now := a.etcd.Server.Leader(); now != a.etcd.Server.MemberID() {
		t.Errorf("after %s's move to itself returned, %s sees %x lead", a.Name(), a.Name(), now)
	}

	// A follower moves it off the leader by an election, as off a slow
	// leader: it stands for election at once, the other follower votes
	// though it hears the leader, and the old leader steps down. Without
	// writes, so that its log is as long as the others' (else the one
	// with the longest log wins the next round, maybe the old leader).
	stopWriters()
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // the last commits reach every member
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if lead = leaderOf(members); lead != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader within 30s after the moves")
		}
	}
	for _, m := range members {
		if m != lead {
			follower = m
			break
		}
	}
	leadID = uint64(lead.etcd.Server.MemberID())
	termBefore := follower.etcd.Server.Term()
	began = time.Now()
	if err := follower.electOffSlow(ctx, leadID); err != nil {
		t.Fatalf("%s standing for election off the leader %s under writes: %v", follower.Name(), lead.Name(), err)
	}
	now := follower.etcd.Server.Leader()
	// etcd updates the leader it reports before the term.
	for deadline := time.Now().Add(5 * time.Second); follower.etcd.Server.Term() <= termBefore && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%s stood for election off %s: %s leads after %v (term %d -> %d)", follower.Name(), lead.Name(),
		memberNameOf(follower.etcd.Server.Cluster().Members(), uint64(now)), time.Since(began).Round(time.Millisecond), termBefore, follower.etcd.Server.Term())
	if uint64(now) == leadID || now == 0 || follower.etcd.Server.Term() <= termBefore {
		t.Errorf("after %s's election off %s: leader %s in term %d (was %d); want another leader in a later term", follower.Name(), lead.Name(),
			memberNameOf(follower.etcd.Server.Cluster().Members(), uint64(now)), follower.etcd.Server.Term(), termBefore)
	}

	// An operator's move to a member that suspects a healthy leader (one
	// slow probe in a busy moment) is done: by the election, or, when
	// the leader wins it (its log the longest), by a transfer.
	lead = leaderOf(members)
	for _, m := range members {
		if m != lead {
			follower = m
		}
	}
	leadID = uint64(lead.etcd.Server.MemberID())
	l := follower.leadership
	l.mu.Lock()
	l.suspect, l.suspectedAt = leadID, time.Now()
	l.mu.Unlock()
	if _, to, err := follower.MoveLeader(ctx, follower.Name()); err != nil || to == lead.Name() {
		t.Errorf("cluster move-leader %s on a member that suspected the healthy leader %s: to %q, %v", follower.Name(), lead.Name(), to, err)
	}
}
