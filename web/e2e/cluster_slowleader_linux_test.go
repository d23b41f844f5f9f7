//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
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
// each in its own network namespace, a renewal writer through each), in
// two clusters side by side:
//   - automatic (--cluster-move-slow-leader, the default): a follower
//     finds the leader slow and moves the leadership off it by an
//     election, twice (the new leader throttled in turn);
//   - move-leader (--cluster-move-slow-leader=false): the followers report
//     the leader slow (cluster status, the leasehold_cluster_leader_slow
//     gauge) and move nothing; `leasehold cluster move-leader` on one of
//     them moves the leadership there, and writes through the followers
//     resume.
//
// The target, writes resume within 5 s, is read as an operator
// would: from the moment the leader's link turned bad, writes through the
// healthy members stop for at most 5 s (the longest gap between
// acknowledged writes through the followers, from the throttle until the
// first write after the leadership left). It is a timing target (logged
// MEASURED, MISSED TARGET when over; make fault-suite fails then); the
// leadership never leaving the throttled leader, or a move-leader that
// does not complete, fails the test, as does a history that is not
// linearizable.
func TestClusterSlowLeader(t *testing.T) {
	testneeds.Slow(t, "two three-member clusters in network namespaces with a throttled leader")
	testneeds.Tool(t, "tc", "apt-get install -y iproute2")
	t.Parallel()
	t.Run("automatic", func(t *testing.T) {
		t.Parallel()
		c := startSlowLeaderCluster(t)
		defer c.finish()
		for round := 1; round <= slowLeaderRounds; round++ {
			c.automaticRound(round)
		}
		for _, m := range c.members {
			for _, line := range strings.Split(m.ts.Log(), "\n") {
				if strings.Contains(line, "leader's commits are slow") || strings.Contains(line, "no longer slow") || strings.Contains(line, "Moved the") || strings.Contains(line, "Stood for election") {
					t.Logf("%s: %s", m.name, line)
				}
			}
		}
	})
	t.Run("move-leader", func(t *testing.T) {
		t.Parallel()
		c := startSlowLeaderCluster(t, "--cluster-move-slow-leader=false")
		defer c.finish()
		c.operatorRound()
		for _, m := range c.members {
			if strings.Contains(m.ts.Log(), "Moved the slow etcd leader") || strings.Contains(m.ts.Log(), "Stood for election") {
				t.Errorf("with --cluster-move-slow-leader=false %s moved the slow leader by itself; its log:\n%s", m.name, m.ts.Log())
			}
		}
	})
}

// slowLeaderRounds is how many times the automatic case throttles its
// leader: twice, so that each move is by a member that has not moved in
// the last minute (moveCooldown).
const slowLeaderRounds = 2

// slowLeaderTarget is the bound on the stall of writes through
// the healthy members after the leader's link turns bad.
const slowLeaderTarget = 5 * time.Second

// slowLeaderCluster is a cluster whose leader the test throttles, with a
// renewal writer through each member.
type slowLeaderCluster struct {
	t       *testing.T
	members []*netMember
	plain   []*clusterMember
	hist    *leaseHistory
	stop    func()
}

func startSlowLeaderCluster(t *testing.T, extra ...string) *slowLeaderCluster {
	t.Helper()
	lab := newNetLab(t, 3)
	members := startNetCluster(t, lab.hosts, extra...)
	ctx := context.Background()
	c := &slowLeaderCluster{t: t, members: members, hist: &leaseHistory{}}
	for _, m := range members {
		c.plain = append(c.plain, m.clusterMember)
	}
	init := "init"
	if _, err := members[0].leases(t, "default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &init}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the probe lease: %v", err)
	}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for i, m := range members {
		leases := m.clients(t, wireProtobuf).CoordinationV1().Leases("default")
		writers.Go(func() { c.hist.renew(ctx, i, leases, stop) })
	}
	c.stop = sync.OnceFunc(func() {
		close(stop)
		writers.Wait()
	})
	t.Cleanup(c.stop)
	eventually(t, 20*time.Second, "renewals through every member", func() (bool, string) {
		for i := range members {
			if !c.hist.succeededVia(c.plain, c.plain[i]) {
				return false, "none yet through " + members[i].name
			}
		}
		return true, ""
	})
	return c
}

// finish stops the writers and checks the history: linearizable, no
// acknowledged write lost.
func (c *slowLeaderCluster) finish() {
	c.stop()
	c.hist.check(c.t)
}

// throttleLeader throttles the link of the member the cluster reports
// leading, once every member is healthy.
func (c *slowLeaderCluster) throttleLeader() (*netMember, time.Time) {
	st := waitNetHealthy(c.t, c.members[0], 3)
	leader := byMemberName(c.t, c.members, st.Leader)
	throttled := time.Now()
	leader.host.throttle(c.t, slowLeaderRate)
	c.t.Logf("throttled %s, the etcd leader, to %s", leader.name, slowLeaderRate)
	return leader, throttled
}

// unthrottle restores leader's link and waits for a write through it.
func (c *slowLeaderCluster) unthrottle(leader *netMember) {
	leader.host.unthrottle(c.t)
	waitNetHealthy(c.t, c.members[0], 3)
	eventually(c.t, 30*time.Second, "a write through the unthrottled "+leader.name, func() (bool, string) {
		return c.hist.succeededThrough(slicesIndex(c.members, leader), time.Now().Add(-time.Second)), "none yet"
	})
}

// automaticRound throttles the leader and waits for the leadership to
// leave it (a follower moves it), then measures the stall of the writes
// through the others.
func (c *slowLeaderCluster) automaticRound(round int) {
	t := c.t
	ctx := context.Background()
	leader, throttled := c.throttleLeader()
	var newLeader string
	for deadline := throttled.Add(60 * time.Second); newLeader == ""; {
		for _, m := range c.members {
			if m == leader {
				continue
			}
			if s, err := m.status(ctx, t); err == nil && s.Leader != "" && s.Leader != leader.name {
				newLeader = s.Leader
			}
		}
		if newLeader == "" {
			if time.Now().After(deadline) {
				leader.host.unthrottle(t)
				t.Fatalf("round %d: the leadership did not leave the throttled %s within 60 s of the throttle", round, leader.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	left := time.Since(throttled)
	resumed := c.hist.nextWriteVia(t, c.plain, leader, throttled.Add(left))
	stall := c.hist.longestGap(c.plain, leader, throttled, throttled.Add(left+resumed))
	verdict := firstLogAfter(c.members, leader, throttled, "leader's commits are slow")
	move := firstLogAfter(c.members, leader, throttled, "Moved the slow etcd leader's leadership off it")
	t.Logf("MEASURED: round %d: the leadership left the throttled %s for %s (seen %v after the throttle; first verdict %s, move %s); the first write sent after that through a follower succeeded %v later; writes through the followers stalled at most %v from the throttle on (issue's target: %v)",
		round, leader.name, newLeader, left.Round(time.Millisecond), verdict, move, resumed.Round(time.Millisecond), stall.Round(time.Millisecond), slowLeaderTarget)
	timingTarget(t, stall <= slowLeaderTarget, "round %d: writes through the followers of the throttled leader %s stalled %v (target %v)", round, leader.name, stall.Round(time.Millisecond), slowLeaderTarget)
	c.unthrottle(leader)
}

// operatorRound throttles the leader, waits for a follower to report it
// slow (nothing moves it: the members only report), and moves the
// leadership there with `leasehold cluster move-leader`.
func (c *slowLeaderCluster) operatorRound() {
	t := c.t
	ctx := context.Background()
	leader, throttled := c.throttleLeader()
	var seen clusterStatus
	var follower *netMember
	var gauge float64
	for retargets, deadline := 0, throttled.Add(30*time.Second); follower == nil; {
		var rtts []string
		elected := ""
		for _, m := range c.members {
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
				gauge = m.metric(ctx, t, "leasehold_cluster_leader_slow")
				break
			}
			if s.Leader != "" && s.Leader != leader.name {
				elected = s.Leader
			}
			rtts = append(rtts, fmt.Sprintf("%s: leader %s, quorum round trip %dms", m.name, s.Leader, s.QuorumRoundTripMs))
		}
		switch {
		case follower != nil:
		case elected != "" && retargets < 3:
			// The throttled leader may miss its quorum's answers for an
			// election timeout and step down (raft's CheckQuorum), and
			// the others elect one: nobody moved it. The throttle then
			// follows the leadership.
			retargets++
			t.Logf("the throttled %s stepped down by itself (its quorum's answers came too late) and %s was elected; throttling %s instead", leader.name, elected, elected)
			leader.host.unthrottle(t)
			leader = byMemberName(t, c.members, elected)
			leader.host.throttle(t, slowLeaderRate)
			throttled, deadline = time.Now(), time.Now().Add(30*time.Second)
		case time.Now().After(deadline):
			leader.host.unthrottle(t)
			t.Fatalf("no follower reported the throttled leader %s slow within 30 s: %s", leader.name, strings.Join(rtts, "; "))
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	reported := time.Since(throttled)
	t.Logf("MEASURED: %s reported the throttled leader slow %v after the throttle (quorum round trip %dms, healthier %s; leasehold_cluster_leader_slow %v)",
		follower.name, reported.Round(time.Millisecond), seen.QuorumRoundTripMs, seen.SlowLeader.Healthier, gauge)
	if st, err := follower.status(ctx, t); gauge != 1 && err == nil && st.SlowLeader != nil {
		t.Errorf("%s reports the leader %s slow, but its leasehold_cluster_leader_slow = %v, want 1", follower.name, st.SlowLeader.Leader, gauge)
	}
	moved := time.Now()
	code, out, errOut := runCLIOn(t, follower.host, "cluster", "move-leader", follower.name, "--kubeconfig", follower.ts.Kubeconfig, "--timeout", "30s")
	// The election may go to the old leader when its log was the longest
	// (the command then says to try again), as an operator would.
	for code != 0 && strings.Contains(errOut, "try again") && time.Since(moved) < 30*time.Second {
		time.Sleep(500 * time.Millisecond)
		code, out, errOut = runCLIOn(t, follower.host, "cluster", "move-leader", follower.name, "--kubeconfig", follower.ts.Kubeconfig, "--timeout", "30s")
	}
	if code != 0 {
		leader.host.unthrottle(t)
		t.Fatalf("cluster move-leader %s off the throttled %s did not complete: exit %d: %s%s", follower.name, leader.name, code, out, errOut)
	}
	cmdTook := time.Since(moved)
	resumed := c.hist.nextWriteVia(t, c.plain, leader, moved)
	t.Logf("MEASURED: cluster move-leader took %v (%s); the first write sent after it began through a follower succeeded %v after it began (issue's target: %v)",
		cmdTook.Round(time.Millisecond), strings.TrimSpace(out), resumed.Round(time.Millisecond), slowLeaderTarget)
	timingTarget(t, resumed <= slowLeaderTarget, "writes through the followers resumed %v after cluster move-leader began (target %v)", resumed.Round(time.Millisecond), slowLeaderTarget)
	c.unthrottle(leader)
}

// metric reads one series of m's /metrics (-1 when it has none).
func (m *netMember) metric(ctx context.Context, t *testing.T, series string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := m.clients(t, wireJSON).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("/metrics of %s: %v", m.name, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// firstLogAfter is when the first log line of a member other than skip
// containing what was written after since, relative to since ("none"
// when no line says so).
func firstLogAfter(members []*netMember, skip *netMember, since time.Time, what string) string {
	var first time.Time
	for _, m := range members {
		if m == skip {
			continue
		}
		for _, line := range strings.Split(m.ts.Log(), "\n") {
			if !strings.Contains(line, what) {
				continue
			}
			stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err == nil && at.After(since) && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
	}
	if first.IsZero() {
		return "none"
	}
	return first.Sub(since).Round(time.Millisecond).String() + " after the throttle"
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
