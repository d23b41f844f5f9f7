//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// throttle limits the host's link both ways with a token bucket (tc tbf:
// netem's delay does not work here), as a failing cable or a saturated
// Wi-Fi link would: packets go through, slowly, and heartbeats keep the
// leader in office. unthrottle removes it.
func (h *netHost) throttle(t *testing.T, rate string) {
	t.Helper()
	for _, args := range [][]string{
		{"netns", "exec", h.lab.hub, "tc", "qdisc", "replace", "dev", h.link, "root", "tbf", "rate", rate, "burst", "4kb", "latency", "500ms"},
		{"netns", "exec", h.ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "4kb", "latency", "500ms"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

func (h *netHost) unthrottle(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{
		{"netns", "exec", h.lab.hub, "tc", "qdisc", "del", "dev", h.link, "root"},
		{"netns", "exec", h.ns, "tc", "qdisc", "del", "dev", "eth0", "root"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// slowLeaderRate is the throttled leader's link: enough for heartbeats,
// far too little for the writers' appends to both followers.
const slowLeaderRate = "96kbit"

// TestClusterSlowLeader throttles the etcd leader's link (three members,
// each in its own network namespace, a renewal writer through each):
//   - the followers report the leader slow (cluster status, the
//     leasehold_cluster_leader_slow gauge), and `leasehold cluster
//     move-leader` on one of them moves the leadership there, after which
//     writes through the followers resume;
//   - with the link of the new leader throttled in turn, a follower moves
//     the leadership by itself (--cluster-move-slow-leader, the default)
//     and writes resume.
//
// The figures are logged (MEASURED); the target is writes within
// 5 s of the move.
func TestClusterSlowLeader(t *testing.T) {
	testneeds.Slow(t, "a three-member cluster in network namespaces with a throttled leader")
	testneeds.Tool(t, "tc", "apt-get install -y iproute2")
	t.Parallel()
	lab := newNetLab(t, 3)
	members := startNetCluster(t, lab.hosts)
	ctx := context.Background()
	plain := make([]*clusterMember, len(members))
	for i, m := range members {
		plain[i] = m.clusterMember
	}
	init := "init"
	if _, err := members[0].leases(t, "default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &init}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the probe lease: %v", err)
	}
	hist := &leaseHistory{}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for i, m := range members {
		leases := m.clients(t, wireProtobuf).CoordinationV1().Leases("default")
		writers.Go(func() { hist.renew(ctx, i, leases, stop) })
	}
	stopped := false
	stopWriters := func() {
		if !stopped {
			stopped = true
			close(stop)
			writers.Wait()
		}
	}
	t.Cleanup(stopWriters)
	eventually(t, 20*time.Second, "renewals through every member", func() (bool, string) {
		for i := range members {
			if !hist.succeededVia(plain, plain[i]) {
				return false, "none yet through " + members[i].name
			}
		}
		return true, ""
	})

	// Round 1: the operator moves the slow leader.
	st := waitNetHealthy(t, members[0], 3)
	leader := byMemberName(t, members, st.Leader)
	throttled := time.Now()
	leader.host.throttle(t, slowLeaderRate)
	t.Logf("throttled %s, the etcd leader, to %s", leader.name, slowLeaderRate)
	// The first follower to report the leader slow moves it, before the
	// automatic move (5 s after the report) would. The leadership may move
	// by itself before a follower finds it slow (a member running the
	// election controller hands it on once every voter answers, which may
	// come just after the throttle): the throttle then follows it, so that
	// the leader is the throttled one.
	var seen clusterStatus
	var follower *netMember
	deadline := time.Now().Add(30 * time.Second)
	for retargets := 0; follower == nil; {
		var rtts []string
		moved := ""
		for _, m := range members {
			if m == leader {
				continue
			}
			s, err := m.status(ctx, t)
			if err != nil {
				rtts = append(rtts, err.Error())
				continue
			}
			if s.SlowLeader != nil && s.SlowLeader.Leader == leader.name {
				seen, follower = s, m
				break
			}
			if s.Leader != "" && s.Leader != leader.name && s.Leader == s.Self {
				moved = s.Leader
			}
			rtts = append(rtts, fmt.Sprintf("%s: leader %s, quorum round trip %dms", m.name, s.Leader, s.QuorumRoundTripMs))
		}
		switch {
		case follower != nil:
		case moved != "" && retargets < 3:
			retargets++
			leader.host.unthrottle(t)
			leader = byMemberName(t, members, moved)
			leader.host.throttle(t, slowLeaderRate)
			throttled, deadline = time.Now(), time.Now().Add(30*time.Second)
			t.Logf("the leadership moved to %s before a follower found the throttled leader slow; throttled %s instead", moved, leader.name)
		case time.Now().After(deadline):
			t.Fatalf("no follower reported the throttled leader %s slow within 30 s: %s", leader.name, strings.Join(rtts, "; "))
		default:
			time.Sleep(200 * time.Millisecond)
		}
	}
	slowWrites := hist.successesVia(plain, leader, throttled)
	stall := hist.longestGap(plain, leader, throttled, time.Now())
	t.Logf("MEASURED: %s reported the throttled leader slow %v after the throttle (quorum round trip %dms, healthier %s); %d writes through the followers succeeded meanwhile, the longest gap between them %v",
		follower.name, time.Since(throttled).Round(time.Millisecond), seen.QuorumRoundTripMs, seen.SlowLeader.Healthier, slowWrites, stall.Round(time.Millisecond))
	moved := time.Now()
	code, out, errOut := runCLIOn(t, follower.host, "cluster", "move-leader", follower.name, "--kubeconfig", follower.ts.Kubeconfig, "--timeout", "30s")
	// The throttled leader may be deposed meanwhile (an election, or the
	// members' own move of a slow leader): the command then says to try
	// again shortly, as an operator would.
	for code != 0 && strings.Contains(errOut, "try again") && time.Since(moved) < 30*time.Second {
		time.Sleep(500 * time.Millisecond)
		code, out, errOut = runCLIOn(t, follower.host, "cluster", "move-leader", follower.name, "--kubeconfig", follower.ts.Kubeconfig, "--timeout", "30s")
	}
	// Whether a move through the saturated link completes is a timing
	// target (issue 29 item 6): the move asks for the transfer until the
	// transferee has caught up, and waits for the appends queued on the
	// link to drain. It completed in 12 consecutive runs on the machine
	// it was written on (asked once per 1.4 s, it had not in 3 of 5), but
	// in a CI run the operator's move did not within its 30 s, after the
	// leadership had moved twice by itself. The rest of the test needs
	// the move; the history is checked either way.
	endEarly := func(what string) {
		t.Helper()
		leader.host.unthrottle(t)
		stopWriters()
		hist.check(t)
		timingTarget(t, false, "the leadership did not leave the throttled leader: %s", what)
	}
	if code != 0 {
		endEarly(fmt.Sprintf("cluster move-leader %s off the throttled %s: exit %d: %s%s", follower.name, leader.name, code, out, errOut))
		return
	}
	cmdTook := time.Since(moved)
	resumed := hist.nextWriteVia(t, plain, leader, moved)
	t.Logf("MEASURED: cluster move-leader took %v (%s); the first write sent after it began through a follower succeeded %v after it began (issue's target: 5 s)",
		cmdTook.Round(time.Millisecond), strings.TrimSpace(out), resumed.Round(time.Millisecond))
	leader.host.unthrottle(t)
	st = waitNetHealthy(t, members[0], 3)
	if st.Leader != follower.name {
		t.Logf("after the move and the unthrottle %s leads (moved to %s)", st.Leader, follower.name)
	}

	// Round 2: the members move it by themselves.
	leader = byMemberName(t, members, st.Leader)
	throttled = time.Now()
	leader.host.throttle(t, slowLeaderRate)
	t.Logf("throttled %s, the etcd leader, to %s; waiting for a follower to move the leadership", leader.name, slowLeaderRate)
	var newLeader string
	// The verdict (about 6 s), the wait of a follower whose lowest-ID
	// peer cannot move (15 s: in its cooldown after round 1) and a move
	// (up to 40 s) fit in 90 s.
	for deadline := time.Now().Add(90 * time.Second); newLeader == ""; {
		for _, m := range members {
			if m == leader {
				continue
			}
			if s, err := m.status(ctx, t); err == nil && s.Leader != "" && s.Leader != leader.name {
				newLeader = s.Leader
			}
		}
		switch {
		case newLeader != "":
		case time.Now().After(deadline):
			endEarly("no follower moved it off " + leader.name + " within 90 s of the throttle, and the others elected none")
			return
		default:
			time.Sleep(200 * time.Millisecond)
		}
	}
	movedAfter := time.Since(throttled)
	resumed = hist.nextWriteVia(t, plain, leader, throttled.Add(movedAfter))
	stall = hist.longestGap(plain, leader, throttled, throttled.Add(movedAfter))
	t.Logf("MEASURED: the leadership left the throttled %s for %s %v after the throttle (a follower moved it, or the others elected one); the first write sent after the move succeeded %v after it; the longest gap between writes through the others from the throttle to the move %v",
		leader.name, newLeader, movedAfter.Round(time.Millisecond), resumed.Round(time.Millisecond), stall.Round(time.Millisecond))
	leader.host.unthrottle(t)
	waitNetHealthy(t, members[0], 3)
	eventually(t, 30*time.Second, "a write through the unthrottled "+leader.name, func() (bool, string) {
		return hist.succeededThrough(slicesIndex(members, leader), time.Now().Add(-time.Second)), "none yet"
	})
	stopWriters()
	hist.check(t)
	for _, m := range members {
		for _, line := range strings.Split(m.ts.Log(), "\n") {
			if strings.Contains(line, "slow") || strings.Contains(line, "Moved the") || strings.Contains(line, "leadership transfer") {
				t.Logf("%s: %s", m.name, line)
			}
		}
	}
}

// longestGap is the longest time between successful writes through
// members other than skip acknowledged between from and to (from and to
// count as writes).
func (h *leaseHistory) longestGap(members []*clusterMember, skip *netMember, from, to time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var at []time.Time
	for _, w := range h.ok {
		if members[w.client] != skip.clusterMember && w.at.After(from) && w.at.Before(to) {
			at = append(at, w.at)
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	gap, last := time.Duration(0), from
	for _, a := range append(at, to) {
		gap = max(gap, a.Sub(last))
		last = a
	}
	return gap
}

func slicesIndex(members []*netMember, m *netMember) int {
	for i, x := range members {
		if x == m {
			return i
		}
	}
	return -1
}

// successesVia counts the successful writes through members other than
// skip acknowledged after since.
func (h *leaseHistory) successesVia(members []*clusterMember, skip *netMember, since time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, w := range h.ok {
		if members[w.client] != skip.clusterMember && w.at.After(since) {
			n++
		}
	}
	return n
}

// nextWriteVia waits for a write sent after since through a member other
// than skip to succeed, and returns how long after since it was
// acknowledged.
func (h *leaseHistory) nextWriteVia(t *testing.T, members []*clusterMember, skip *netMember, since time.Time) time.Duration {
	t.Helper()
	var took time.Duration
	eventually(t, 30*time.Second, "a write through a member other than "+skip.name, func() (bool, string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		took = 0
		for _, w := range h.ok {
			if w.call.After(since) && members[w.client] != skip.clusterMember && (took == 0 || w.at.Sub(since) < took) {
				took = w.at.Sub(since)
			}
		}
		return took > 0, "none yet"
	})
	return took
}
