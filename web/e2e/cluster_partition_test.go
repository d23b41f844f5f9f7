//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
)

// Ports inside each member's namespace: every member has an address of
// its own, so they can all use the usual ones.
const (
	netAPIPort    = "6443"
	netPeerPort   = "2380"
	netClientPort = "2379"
	netAdminToken = "e2e-partition-admin-token"
)

// netMember is a cluster member running in its own network namespace, as
// a device would: it serves HTTPS on its namespace address (--tls-auto,
// the default off loopback) with a token file, joins over TLS, and its
// clients dial it from inside its namespace.
type netMember struct {
	*clusterMember
	host *netHost
	// cfg is the member's kubeconfig with a dialer inside its namespace.
	cfg *rest.Config
	// ctrl follows the election controller here.
	ctrl controllerLog
}

// startNetCluster runs three members on hosts: m1 starts the cluster,
// m2 joins through m1 and m3 through m2, each with the cluster token over
// TLS (plain HTTP is refused off loopback); extra are more serve flags.
func startNetCluster(t *testing.T, hosts []*netHost, extra ...string) []*netMember {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(netAdminToken+`,admin,admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var members []*netMember
	for i, h := range hosts {
		m := &netMember{clusterMember: &clusterMember{name: h.name, dataDir: t.TempDir()}, host: h}
		m.args = []string{"--listen", h.ip + ":" + netAPIPort, "--data-dir", m.dataDir, "--log-level", "info",
			"--token-auth-file", tokens,
			"--cluster-token", "e2e-partition-token", "--member-name", m.name,
			"--peer-listen", h.ip + ":" + netPeerPort, "--cluster-client-listen", h.ip + ":" + netClientPort}
		m.args = append(m.args, extra...)
		if i == 0 {
			m.args = append(m.args, "--cluster-init")
		} else {
			m.args = append(m.args, "--join", members[i-1].ts.URL)
		}
		p, ready := spawnServerVia(t, h.exec(), m.args, m.watchLog)
		if !ready {
			t.Fatalf("member %s exited with code %d before it was ready; log:\n%s", m.name, p.code, p.log.String())
		}
		m.startedAt = time.Now()
		m.ts = &testServer{URL: p.url, DataDir: m.dataDir, Kubeconfig: filepath.Join(m.dataDir, "kubeconfig"), proc: p}
		if !strings.HasPrefix(p.url, "https://") {
			t.Fatalf("member %s serves %s: off loopback it must serve HTTPS", m.name, p.url)
		}
		m.cfg = restConfig(t, m.ts, wireProtobuf)
		m.cfg.Dial = h.DialContext
		members = append(members, m)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("member %s log:\n%s", m.name, m.ts.Log())
			}
		})
	}
	waitNetHealthy(t, members[2], 3)
	return members
}

// controllerLog is what a member's log says of its election controller.
// storage.Lead logs "Leading" before the controller starts and "Lost
// leadership" after it stopped; storage/etcd warns when the election lease
// could not be renewed, the moment the controller is told to stop.
type controllerLog struct {
	mu        sync.Mutex
	running   bool
	started   []time.Time
	withdrawn []time.Time
	stopped   []time.Time
}

// watchLog follows the election controller in the member's log.
func (m *netMember) watchLog(line string) {
	if !strings.Contains(line, "election=election-controller") {
		return
	}
	c := &m.ctrl
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	switch {
	case strings.Contains(line, "msg=Leading "):
		c.running = true
		c.started = append(c.started, now)
	case strings.Contains(line, `msg="Election lease expired`):
		c.withdrawn = append(c.withdrawn, now)
	case strings.Contains(line, `msg="Lost leadership;`):
		c.running = false
		c.stopped = append(c.stopped, now)
	}
}

// runsController reports whether the member's controller runs now.
func (m *netMember) runsController() bool {
	m.ctrl.mu.Lock()
	defer m.ctrl.mu.Unlock()
	return m.ctrl.running
}

// lastAfter is the last of times after since (zero if none).
func (c *controllerLog) lastAfter(times *[]time.Time, since time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	for _, t := range *times {
		if t.After(since) {
			at = t
		}
	}
	return at
}

// clients is a clientset on the member's own connection pool.
func (m *netMember) clients(t *testing.T, contentType string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(m.cfg)
	cfg.ContentType = contentType
	return clientset(t, cfg)
}

func (m *netMember) leases(t *testing.T, namespace string) typedcoordinationv1.LeaseInterface {
	t.Helper()
	return m.clients(t, wireJSON).CoordinationV1().Leases(namespace)
}

// status is GET /leasehold/v1/cluster on the member, what "leasehold
// cluster status" shows.
func (m *netMember) status(ctx context.Context, t *testing.T) (clusterStatus, error) {
	var st clusterStatus
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := m.clients(t, wireJSON).Discovery().RESTClient().Get().AbsPath("/leasehold/v1/cluster").DoRaw(ctx)
	if err != nil {
		return st, fmt.Errorf("cluster status of %s: %w", m.name, err)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("decode %q: %w", body, err)
	}
	return st, nil
}

// waitNetHealthy waits until m sees want healthy voting members and a
// leader.
func waitNetHealthy(t *testing.T, m *netMember, want int) clusterStatus {
	t.Helper()
	return waitHealthyVoters(t, m.name, want, func() (clusterStatus, error) { return m.status(context.Background(), t) })
}

// partitionRun is what one partition of one member measured.
type partitionRun struct {
	what string
	// first5xx is from the cut to the first write on the cut-off member
	// answered with a 5xx Status, first5xxTook how long that request
	// took (one in flight at the cut waits for the request timeout);
	// later5xx is the longest of the reads and writes that followed.
	first5xx, first5xxTook, later5xx time.Duration
	// majorityWrite is from the cut to the first successful write on the
	// majority issued after the cut; majorityGap the longest time between
	// two successful majority writes from the cut to the heal.
	majorityWrite, majorityGap time.Duration
	// electorStop is from the cut to the cut-off member's elector stopping
	// to lead (negative when it stopped before the cut); electorFailover to
	// an elector on the majority leading.
	electorStop, electorFailover time.Duration
	// controllerMove is from the cut to the controller's start on the
	// majority (zero when it already ran there).
	controllerMove time.Duration
	// watchEnd is from the cut to the end of the watch on the cut-off
	// member.
	watchEnd time.Duration
	// catchUp is from the heal to the first successful write through the
	// healed member.
	catchUp time.Duration
}

func (r partitionRun) log(t *testing.T) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	t.Logf("MEASURED (%s): cut-off member: first 5xx write %s after the cut (that request took %s), the next 6 reads and writes answered 5xx within %s, its watch ended %s after the cut; majority: first write issued after the cut succeeded %s after it, longest gap between successful writes %s; elector on the cut-off member stopped leading %s after the cut, an elector on the majority led %s after it (leases of %v); controller started on the majority %s after the cut; after the heal the member's first successful write came %s later",
		r.what, ms(r.first5xx), ms(r.first5xxTook), ms(r.later5xx), ms(r.watchEnd), ms(r.majorityWrite), ms(r.majorityGap), ms(r.electorStop), ms(r.electorFailover), leLeaseDuration, ms(r.controllerMove), ms(r.catchUp))
}

// TestClusterPartition runs a 3-member cluster with each member in its own
// network namespace, a client-go elector and a renewal writer on every
// member (each dialing its member from inside the member's namespace, as
// apps on that device do), and partitions members off the network with
// their veth link. First the member holding the etcd leader, whose elector
// leads: the cut-off member answers writes and linearizable reads with a
// 5xx Status within a few seconds and ends its watches, its elector stops
// leading before any other elector leads, the majority elects a new etcd
// leader, renews there and runs the election controller; after the heal
// the member catches up and its writes succeed again. Then a follower:
// the same on the cut-off member, while the majority keeps its leader and
// its write availability. Every probe-lease operation is checked for
// linearizability with porcupine, and no two electors may lead at once.
func TestClusterPartition(t *testing.T) {
	t.Parallel()
	lab := newNetLab(t, 3)
	members := startNetCluster(t, lab.hosts)
	ctx := context.Background()
	plain := make([]*clusterMember, len(members))
	for i, m := range members {
		plain[i] = m.clusterMember
	}

	// The probe lease every writer renews, recorded for porcupine, and a
	// lease for the explicit writes on the cut-off member.
	init := "init"
	for _, name := range []string{"probe", "cut-probe"} {
		if _, err := members[0].leases(t, "default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &init}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create lease %s: %v", name, err)
		}
	}
	hist := &leaseHistory{}
	stopRenew := make(chan struct{})
	var writers sync.WaitGroup
	for i, m := range members {
		leases := m.clients(t, wireProtobuf).CoordinationV1().Leases("default")
		writers.Go(func() { hist.renew(ctx, i, leases, stopRenew) })
	}
	writersStopped := false
	stopWriters := func() {
		if !writersStopped {
			writersStopped = true
			close(stopRenew)
			writers.Wait()
		}
	}
	t.Cleanup(stopWriters)
	eventually(t, 20*time.Second, "renewals on every member", func() (bool, string) {
		for i := range members {
			if !hist.succeededVia(plain, plain[i]) {
				return false, "none yet through " + members[i].name
			}
		}
		return true, ""
	})
	eventually(t, 20*time.Second, "the election controller runs on one member", func() (bool, string) {
		n := 0
		for _, m := range members {
			if m.runsController() {
				n++
			}
		}
		return n == 1, fmt.Sprintf("%d members run it", n)
	})

	st := waitNetHealthy(t, members[0], 3)
	leader := byMemberName(t, members, st.Leader)
	run1, lt1 := partition(t, members, leader, "e2e-le", hist, "etcd leader "+leader.name, false)

	st = waitNetHealthy(t, members[0], 3)
	var follower *netMember
	for _, m := range members {
		if m.name != st.Leader {
			follower = m
			break
		}
	}
	run2, lt2 := partition(t, members, follower, "e2e-le-2", hist, "follower "+follower.name, true)
	if st2 := waitNetHealthy(t, follower, 3); st2.Leader != st.Leader {
		t.Logf("the etcd leader moved from %s to %s while follower %s was cut off", st.Leader, st2.Leader, follower.name)
	}

	stopWriters()
	hist.check(t)
	for _, lt := range []*leaderTracker{lt1, lt2} {
		if _, overlap := lt.snapshot(); len(overlap) > 0 {
			t.Errorf("two electors led at once: %q", overlap)
		}
	}
	run1.log(t)
	run2.log(t)
	if d, rng, ok := faultScheduleFromEnv(t); ok && !t.Failed() {
		partitionSchedule(t, members, d, rng)
	}
}

// partitionSchedule cuts random members off (the etcd leader or a
// follower) one after another for d, each round with a fresh probe lease
// (linearizability is per object: small histories check fast) and fresh
// electors, checking each round as the first two are checked.
func partitionSchedule(t *testing.T, members []*netMember, d time.Duration, rng *rand.Rand) {
	ctx := context.Background()
	plain := make([]*clusterMember, len(members))
	for i, m := range members {
		plain[i] = m.clusterMember
	}
	end := time.Now().Add(d)
	for round := 1; time.Now().Before(end) && !t.Failed(); round++ {
		st := waitNetHealthy(t, members[0], 3)
		cut, what := members[rng.IntN(len(members))], "follower"
		if cut.name == st.Leader {
			what = "etcd leader"
		}
		probe, init := fmt.Sprintf("probe-%03d", round), "init"
		if _, err := members[0].leases(t, "default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: probe},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &init}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("round %d: create lease %s: %v", round, probe, err)
		}
		hist := &leaseHistory{lease: probe}
		stop := make(chan struct{})
		var writers sync.WaitGroup
		for i, m := range members {
			leases := m.clients(t, wireProtobuf).CoordinationV1().Leases("default")
			writers.Go(func() { hist.renew(ctx, i, leases, stop) })
		}
		eventually(t, 20*time.Second, "renewals through every member", func() (bool, string) {
			for i := range members {
				if !hist.succeededVia(plain, plain[i]) {
					return false, "none yet through " + members[i].name
				}
			}
			return true, ""
		})
		run, lt := partition(t, members, cut, fmt.Sprintf("e2e-le-r%03d", round), hist,
			fmt.Sprintf("round %d: %s %s", round, what, cut.name), what == "follower")
		close(stop)
		writers.Wait()
		hist.check(t)
		if _, overlap := lt.snapshot(); len(overlap) > 0 {
			t.Errorf("round %d: two electors led at once: %q", round, overlap)
		}
		run.log(t)
		// A pause between faults, random as the faults are.
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
	}
}

func byMemberName(t *testing.T, members []*netMember, name string) *netMember {
	t.Helper()
	for _, m := range members {
		if m.name == name {
			return m
		}
	}
	t.Fatalf("no member %q", name)
	return nil
}

// partition cuts member cut off the network and heals it, with a fresh
// set of electors on lease (the one on cut starting first, so that it
// leads when the cut comes), checking the semantics the issue asks for and
// measuring them. When majorityKeepsWriting (cut holds no etcd leader),
// the majority's successful writes must never pause for as long as the
// request timeout. The electors are stopped before it returns.
func partition(t *testing.T, members []*netMember, cut *netMember, lease string, hist *leaseHistory, what string, majorityKeepsWriting bool) (partitionRun, *leaderTracker) {
	t.Helper()
	ctx := context.Background()
	run := partitionRun{what: what}
	lt := &leaderTracker{leading: map[string]bool{}}
	var electors []*elector
	startOn := func(m *netMember) {
		// Without release: the cut-off elector's release request would
		// delay its OnStoppedLeading past the majority's takeover
		// (startElectorOn), and the check below is of the server.
		e := startElectorOn(t, m.cfg, lt, "e-"+m.name, lease, false)
		electors = append(electors, e)
	}
	stopElectors := func() {
		for _, e := range electors {
			e.cancel()
			<-e.done
		}
		electors = nil
	}
	defer stopElectors()
	startOn(cut)
	if first := waitLeader(t, lt, 1, 20*time.Second); first != "e-"+cut.name {
		t.Fatalf("the first elector to lead is %s, want e-%s", first, cut.name)
	}
	var majority []*netMember
	for _, m := range members {
		if m != cut {
			majority = append(majority, m)
			startOn(m)
		}
	}
	cutIndex := slices.Index(members, cut)

	// A watch and a lease to write on the cut-off member, through its own
	// namespace.
	leases := cut.leases(t, "default")
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch on %s: %v", cut.name, err)
	}
	defer w.Stop()
	probe, err := leases.Get(ctx, "cut-probe", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get cut-probe: %v", err)
	}
	ctrlBefore := map[string]bool{}
	for _, m := range members {
		ctrlBefore[m.name] = m.runsController()
	}

	// The etcd leader is what it was when the test chose whom to cut,
	// unless an election came in between (a loaded machine): then the
	// majority's write availability is not expected to hold.
	stBefore, err := majority[0].status(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	if holds := stBefore.Leader == cut.name; holds == majorityKeepsWriting {
		t.Logf("the etcd leader moved to %s before the cut", stBefore.Leader)
		majorityKeepsWriting = !holds
	}
	t.Logf("cutting %s off the network (etcd leader %s, controller on it: %v)", what, stBefore.Leader, ctrlBefore[cut.name])
	cutAt := time.Now()
	cut.host.cut()

	// The cut-off member answers, with a 5xx Status, within a few
	// seconds: its clients are told rather than left hanging.
	eventually(t, 30*time.Second, "a write on the cut-off member fails with 5xx", func() (bool, string) {
		now := metav1.NewMicroTime(time.Now())
		probe.Spec.RenewTime = &now
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		updated, err := leases.Update(wctx, probe, metav1.UpdateOptions{})
		took := time.Since(start)
		cancel()
		if err == nil {
			probe = updated
			return false, "the write succeeded (the member has not noticed yet)"
		}
		st := apiStatus(t, err)
		if st.Code < 500 {
			return false, fmt.Sprintf("status %d %s: %s", st.Code, st.Reason, st.Message)
		}
		run.first5xx = time.Since(cutAt)
		run.first5xxTook = took
		return true, ""
	})
	for range 3 {
		for _, op := range []string{"write", "read"} {
			start := time.Now()
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			if op == "write" {
				_, err = leases.Update(rctx, probe, metav1.UpdateOptions{})
			} else {
				_, err = leases.Get(rctx, "cut-probe", metav1.GetOptions{})
			}
			cancel()
			run.later5xx = max(run.later5xx, time.Since(start))
			if err == nil {
				t.Errorf("a %s on the cut-off member succeeded", op)
			} else if st := apiStatus(t, err); st.Code < 500 {
				t.Errorf("a %s on the cut-off member: status %d %s, want 5xx", op, st.Code, st.Reason)
			}
		}
	}
	if slowest := max(run.first5xxTook, run.later5xx); slowest > 10*time.Second {
		t.Errorf("the cut-off member took %v to answer a request, want a bounded few seconds", slowest)
	}
	eventually(t, 20*time.Second, "the watch on the cut-off member ends", func() (bool, string) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				run.watchEnd = time.Since(cutAt)
				return true, ""
			}
			return false, "event " + string(ev.Type)
		default:
			return false, "still open"
		}
	})

	// The majority: an etcd leader among them, writes, an elector, the
	// controller.
	eventually(t, 30*time.Second, "an etcd leader on the majority", func() (bool, string) {
		st, err := majority[0].status(ctx, t)
		if err != nil {
			return false, err.Error()
		}
		return st.Leader != "" && st.Leader != cut.name, "leader " + st.Leader
	})
	eventually(t, 30*time.Second, "a write issued after the cut succeeds on the majority", func() (bool, string) {
		at, ok := firstMajorityWrite(hist, cutIndex, cutAt)
		run.majorityWrite = at.Sub(cutAt)
		return ok, "none yet"
	})
	// The elector on the cut-off member may have stopped leading before
	// the cut: on a loaded machine its renewals can miss their deadline
	// (its client times out after 1 s). A majority elector then takes over
	// from that stop; either way the stop must come first.
	stopped := false
	eventually(t, 30*time.Second, "an elector on the majority leads", func() (bool, string) {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		for _, e := range lt.events { // in the order they happened
			if e.id == "e-"+cut.name && !e.leading && !stopped {
				stopped, run.electorStop = true, e.at.Sub(cutAt)
			}
			if e.id != "e-"+cut.name && e.leading && (e.at.After(cutAt) || stopped) {
				run.electorFailover = e.at.Sub(cutAt)
				return true, ""
			}
		}
		return false, fmt.Sprintf("leading: %v", lt.leading)
	})
	if !stopped || run.electorStop > run.electorFailover {
		t.Errorf("the elector on the cut-off member stopped leading %v after the cut (stopped: %v), and one on the majority led %v after it: want the stop first", run.electorStop, stopped, run.electorFailover)
	}
	if run.electorStop < 0 {
		t.Logf("the elector on the cut-off member had stopped leading %v before the cut (its renewals missed their deadline on a loaded machine)", -run.electorStop)
	}
	eventually(t, 30*time.Second, "the election controller runs on the majority only", func() (bool, string) {
		var on []string
		for _, m := range members {
			if m.runsController() {
				on = append(on, m.name)
			}
		}
		return len(on) == 1 && on[0] != cut.name, fmt.Sprintf("running on %q", on)
	})
	// A cut-off member never starts the controller: it cannot renew its
	// campaign without a quorum.
	if began := cut.ctrl.lastAfter(&cut.ctrl.started, cutAt); !began.IsZero() {
		t.Errorf("the election controller started on the cut-off %s %v after the cut", cut.name, began.Sub(cutAt))
	}
	for _, m := range majority {
		// The hand-over is timed when the cut-off member ran the
		// controller at the cut and a majority member took it over (it may
		// also have been between two campaigns: an etcd leader change ends
		// the campaign's session).
		if !ctrlBefore[cut.name] || !m.runsController() || ctrlBefore[m.name] {
			continue
		}
		started := m.ctrl.lastAfter(&m.ctrl.started, cutAt)
		run.controllerMove = started.Sub(cutAt)
		withdrawn := cut.ctrl.lastAfter(&cut.ctrl.withdrawn, cutAt)
		stopped := cut.ctrl.lastAfter(&cut.ctrl.stopped, cutAt)
		t.Logf("controller: on the cut-off %s told to stop %v and stopped %v after the cut; started on %s %v after it",
			cut.name, sinceOrNever(withdrawn, cutAt), sinceOrNever(stopped, cutAt), m.name, sinceOrNever(started, cutAt))
		if stopped.IsZero() || stopped.After(started) {
			t.Errorf("the election controller started on %s before it stopped on the cut-off %s", m.name, cut.name)
		}
	}

	// Heal: the member catches up, and its writes succeed again.
	healAt := time.Now()
	t.Logf("healing %s %v after the cut", cut.name, healAt.Sub(cutAt).Round(time.Millisecond))
	run.majorityGap = longestMajorityGap(hist, cutIndex, cutAt, healAt)
	if majorityKeepsWriting && run.majorityGap >= 3*time.Second {
		t.Errorf("the majority went %v without a successful write while a follower was cut off", run.majorityGap)
	}
	cut.host.heal()
	eventually(t, 60*time.Second, "a write through the healed member", func() (bool, string) {
		at, ok := firstWriteVia(hist, cutIndex, healAt)
		run.catchUp = at.Sub(healAt)
		return ok, "none yet"
	})
	waitNetHealthy(t, cut, 3)
	stopElectors()
	return run, lt
}

// sinceOrNever is at-since, or "never" when at is zero.
func sinceOrNever(at, since time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(since).Round(time.Millisecond).String()
}

// firstMajorityWrite is when the first write issued after since through
// a member other than members[cut] succeeded.
func firstMajorityWrite(h *leaseHistory, cut int, since time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first time.Time
	for _, op := range h.ops {
		if _, ok := op.Input.(casInput); !ok || op.ClientId == cut || op.Output != casOutput("ok") || op.Call < since.UnixNano() {
			continue
		}
		if at := time.Unix(0, op.Return); first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// firstWriteVia is when the first write issued after since through
// members[client] succeeded.
func firstWriteVia(h *leaseHistory, client int, since time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.ok {
		if w.client == client && w.at.After(since) {
			return w.at, true
		}
	}
	return time.Time{}, false
}

// longestMajorityGap is the longest time without a successful majority
// write between from and to (the ends count as writes: a gap that starts
// at the cut counts from it).
func longestMajorityGap(h *leaseHistory, cut int, from, to time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var times []time.Time
	for _, op := range h.ops {
		if _, ok := op.Input.(casInput); !ok || op.ClientId == cut || op.Output != casOutput("ok") {
			continue
		}
		if at := time.Unix(0, op.Return); at.After(from) && at.Before(to) {
			times = append(times, at)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	prev, gap := from, time.Duration(0)
	for _, at := range append(times, to) {
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}
