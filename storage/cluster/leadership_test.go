package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

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
