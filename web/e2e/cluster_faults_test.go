package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// The fault-injection suite: three members as real processes on loopback,
// a client-go LeaderElector and a renewal writer on every member, and one
// fault after another. Every read and compare-and-swap of the writers is
// recorded and checked with porcupine, one lease per round (linearizability
// is local: a history is linearizable when each object's is, so a fresh
// lease per round keeps each check small), and the electors' leadership
// is tracked for overlaps. The CI run injects each fault once; with
// LEASEHOLD_FAULT_DURATION (e.g. 10m, "make fault-suite") a randomized
// schedule of the same faults follows for that long.

// faultDurationEnv sets the length of the randomized schedule;
// faultSeedEnv replays one (the seed is logged).
const (
	faultDurationEnv = "LEASEHOLD_FAULT_DURATION"
	faultSeedEnv     = "LEASEHOLD_FAULT_SEED"
)

// faultCluster is the cluster under faults with its clients.
type faultCluster struct {
	t       *testing.T
	ctx     context.Context
	members []*clusterMember
	// small is the member whose data directory is on a small tmpfs at
	// mnt, for the disk-full fault.
	small *clusterMember
	mnt   string
	// lt tracks the electors of all rounds: electors[i] is a client of
	// members[i].
	lt       *leaderTracker
	electors []*faultElector
	round    int
	began    time.Time // when the rounds began

	mu       sync.Mutex
	measured map[string][]time.Duration
	// lastStop is when lastStopped, the last elector to lead, stopped.
	lastStop    time.Time
	lastStopped string
	starts      []leadStart
}

// leadStart is when an elector started leading.
type leadStart struct {
	id string
	at time.Time
}

// TestClusterFaults injects, into one 3-member cluster, a SIGSTOP/SIGCONT
// of the member holding the etcd leader and the leading elector, a SIGKILL
// (and restart) of the member running the election controller, and a full
// disk under one member; then, when LEASEHOLD_FAULT_DURATION is set, a
// randomized schedule of these faults. After each round the lease's
// history must be linearizable and the members must agree on the data; at
// the end no two electors may have led at once.
func TestClusterFaults(t *testing.T) {
	testneeds.Slow(t, "the cluster fault suite")
	t.Parallel()
	c := newFaultCluster(t)

	// The CI rounds: each fault once.
	c.runRound("sigstop", func(r *faultRound) { c.pause(r, c.memberOf(c.leadingElector())) })
	c.runRound("sigkill-controller", func(r *faultRound) { c.kill(r, c.controllerMember()) })
	c.runRound("disk-full", func(r *faultRound) { c.fillDisk(r) })
	t.Logf("the three CI rounds took %v", time.Since(c.began).Round(time.Millisecond))

	if d, rng, ok := faultScheduleFromEnv(t); ok {
		c.schedule(d, rng)
	}

	starts, overlap := c.lt.snapshot()
	t.Logf("elector leadership starts: %q", starts)
	if len(overlap) > 0 {
		t.Errorf("two electors led at once: %q", overlap)
	}
	c.summary()
}

func newFaultCluster(t *testing.T) *faultCluster {
	t.Helper()
	// etcd preallocates its write-ahead log in segments of 64 MiB (the
	// next one ahead) and keeps up to five until a snapshot lets it purge
	// them; the repair of a segment cut short by a full disk keeps a copy
	// of it (.broken) for good. Each disk-full round writes large leases
	// until the member stops, up to a segment's worth. 768 MiB holds seven
	// segments, the database, and room to fill: the restarts of the
	// randomized schedule's back-to-back disk-full rounds need 64 MiB free
	// for their next segment once the filler is gone (with 192 MiB, and
	// then 320 MiB, they failed on it).
	began := time.Now()
	mnt := mountTmpfs(t, "768m")
	c := &faultCluster{t: t, ctx: context.Background(), mnt: mnt,
		lt: &leaderTracker{leading: map[string]bool{}}, measured: map[string][]time.Duration{}}
	c.members = startClusterIn(t, []string{"", "", filepath.Join(mnt, "data")})
	c.small = c.members[2]
	st := c.members[0].waitHealthy(t, 3)

	// The elector on the etcd leader's member starts first, so that it
	// leads: the first pause then stops both leaders at once.
	order := slices.Clone(c.members)
	slices.SortStableFunc(order, func(a, b *clusterMember) int {
		if a.name == st.Leader {
			return -1
		}
		if b.name == st.Leader {
			return 1
		}
		return 0
	})
	c.electors = make([]*faultElector, len(c.members))
	for n, m := range order {
		c.electors[c.index(m)] = c.startFaultElector(m)
		if n == 0 {
			waitLeader(t, c.lt, 1, 20*time.Second)
		}
	}
	t.Logf("etcd leader %s; elector leading %s; election controller on %s; cluster and electors up in %v",
		st.Leader, c.leadingElector(), c.controllerMember().name, time.Since(began).Round(time.Millisecond))
	c.began = time.Now()
	return c
}

// faultLeaseDuration is the fault electors' lease: the 4 s, with
// leRenewDeadline (2 s) and leRetryPeriod (300 ms). A leader gives up
// RetryPeriod+RenewDeadline after its last renewal's answer; another
// takes over LeaseDuration after it saw that renewal. The strict overlap
// check holds while an answer takes less than the difference, 1.7 s (3 s
// leases left 0.7 s, which a loaded machine ate: a hand-over margin of
// 156 ms was measured).
const faultLeaseDuration = 4 * time.Second

// faultElector is a client-go LeaderElector on one member that runs again
// after it lost leadership, as a component restarted by its supervisor
// does (Run returns for good when it stops leading). Unlike startElector's
// it does not release on cancel (ReleaseOnCancel): client-go cancels the
// leader's context only after that release request, which a stopped
// server holds for the whole client timeout, past the lease's expiry; the
// overlap check then would measure client-go's release, not the server.
// A crashed component does not release either.
type faultElector struct {
	id string
	mu sync.Mutex
	le *leaderelection.LeaderElector
}

func (c *faultCluster) startFaultElector(m *clusterMember) *faultElector {
	t := c.t
	t.Helper()
	fe := &faultElector{id: "e-" + m.name}
	cfg := restConfig(t, m.ts, wireProtobuf)
	cfg.UserAgent = "e2e-" + fe.id + "/leader-election"
	cfg.Timeout = leRenewDeadline / 2 // what NewFromKubeconfig sets
	cs := clientset(t, cfg)
	newElector := func() (*leaderelection.LeaderElector, error) {
		return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: "e2e-le", Namespace: "kube-system"},
				Client:     cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: fe.id},
			},
			LeaseDuration: faultLeaseDuration, RenewDeadline: leRenewDeadline, RetryPeriod: leRetryPeriod,
			Name: "e2e-le",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { c.leadStarted(fe.id) },
				OnStoppedLeading: func() { c.leadStopped(fe.id) },
			},
		})
	}
	le, err := newElector()
	if err != nil {
		t.Fatalf("new elector %s: %v", fe.id, err)
	}
	fe.le = le
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			le.Run(ctx)
			if ctx.Err() != nil {
				return
			}
			le, _ = newElector() // the configuration was valid above
			fe.mu.Lock()
			fe.le = le
			fe.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return fe
}

// leader is the holder the elector last observed.
func (fe *faultElector) leader() string {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	return fe.le.GetLeader()
}

// leadStarted and leadStopped feed the overlap check and time each
// hand-over: from the previous leader's stop to the next one's start, the
// margin by which the overlap check held.
func (c *faultCluster) leadStarted(id string) {
	c.lt.started(id)
	c.mu.Lock()
	stop, prev := c.lastStop, c.lastStopped
	c.starts = append(c.starts, leadStart{id: id, at: time.Now()})
	c.mu.Unlock()
	if prev != "" && prev != id {
		c.measure("hand-over margin between electors (old leader stopped, new one started)", time.Since(stop))
	}
}

func (c *faultCluster) leadStopped(id string) {
	c.lt.mu.Lock()
	was := c.lt.leading[id]
	c.lt.mu.Unlock()
	c.lt.stopped(id)
	if was {
		c.mu.Lock()
		c.lastStop, c.lastStopped = time.Now(), id
		c.mu.Unlock()
	}
}

func (c *faultCluster) index(m *clusterMember) int { return slices.Index(c.members, m) }

// memberOf is the member elector id ("e-m2") talks to.
func (c *faultCluster) memberOf(id string) *clusterMember {
	for _, m := range c.members {
		if "e-"+m.name == id {
			return m
		}
	}
	c.t.Fatalf("no member for elector %q", id)
	return nil
}

// leadingElector waits until an elector leads and returns its id.
func (c *faultCluster) leadingElector() string {
	var who string
	eventually(c.t, 20*time.Second, "an elector leads", func() (bool, string) {
		c.lt.mu.Lock()
		defer c.lt.mu.Unlock()
		for id, on := range c.lt.leading {
			if on {
				who = id
				return true, ""
			}
		}
		return false, fmt.Sprintf("starts %q", c.lt.starts)
	})
	return who
}

// measure records one measured figure (summarized at the end).
func (c *faultCluster) measure(what string, d time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	c.measured[what] = append(c.measured[what], d)
	c.mu.Unlock()
	c.t.Logf("MEASURED: %s: %v", what, d.Round(time.Millisecond))
}

func (c *faultCluster) summary() {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.measured))
	for n := range c.measured {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		ds := slices.Clone(c.measured[n])
		slices.Sort(ds)
		c.t.Logf("SUMMARY: %s: n=%d min %v median %v max %v", n, len(ds),
			ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
}

// faultRound is one fault with its own lease, renewed through every
// member by a recording writer.
type faultRound struct {
	hist *leaseHistory
	stop chan struct{}
	wg   sync.WaitGroup
}

// runRound runs fault under renewal load on a fresh lease, then checks
// the lease's history and that every member serves the same data.
func (c *faultCluster) runRound(name string, fault func(r *faultRound)) {
	t := c.t
	t.Helper()
	c.round++
	start := time.Now()
	r := &faultRound{hist: &leaseHistory{lease: fmt.Sprintf("faults-%03d-%s", c.round, name)}, stop: make(chan struct{})}
	init := "init" // leaseModel's initial state
	eventually(t, 30*time.Second, "create lease "+r.hist.lease, func() (bool, string) {
		_, err := c.leases(c.members[0], wireJSON).Create(c.ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: r.hist.lease}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &init}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err.Error()
		}
		return err == nil || apierrors.IsAlreadyExists(err), ""
	})
	for i, m := range c.members {
		leases := c.leases(m, wireProtobuf)
		r.wg.Go(func() { r.hist.renew(c.ctx, i, leases, r.stop) })
	}
	defer func() {
		select {
		case <-r.stop:
		default:
			close(r.stop)
			r.wg.Wait()
		}
	}()
	eventually(t, 20*time.Second, "renewals through every member before the fault", func() (bool, string) {
		for i := range c.members {
			if !r.hist.succeededThrough(i, start) {
				return false, "none yet through " + c.members[i].name
			}
		}
		return true, ""
	})
	t.Logf("round %d: %s", c.round, name)
	fault(r)
	close(r.stop)
	r.wg.Wait()
	r.hist.check(t)
	c.checkSameData()
	t.Logf("round %d (%s) took %v", c.round, name, time.Since(start).Round(time.Millisecond))
	if _, overlap := c.lt.snapshot(); len(overlap) > 0 {
		t.Fatalf("round %d (%s): two electors led at once: %q", c.round, name, overlap)
	}
}

func (c *faultCluster) leases(m *clusterMember, wire string) typedcoordinationv1.LeaseInterface {
	cfg := restConfig(c.t, m.ts, wire)
	cfg.Timeout = 10 * time.Second
	return clientset(c.t, cfg).CoordinationV1().Leases("default")
}

// nextRenewal waits for a successful write sent after since through any
// member but skip, and returns how long after since it was acknowledged
// (the first to be acknowledged, of those sent after since).
func (c *faultCluster) nextRenewal(r *faultRound, since time.Time, skip *clusterMember) time.Duration {
	var took time.Duration
	eventually(c.t, 30*time.Second, "a renewal through a member other than "+skip.name, func() (bool, string) {
		r.hist.mu.Lock()
		defer r.hist.mu.Unlock()
		took = 0
		for _, w := range r.hist.ok {
			if w.call.After(since) && c.members[w.client] != skip && (took == 0 || w.at.Sub(since) < took) {
				took = w.at.Sub(since)
			}
		}
		return took > 0, "none yet"
	})
	return took
}

// servesAgain waits for a successful write through m after since.
func (c *faultCluster) servesAgain(r *faultRound, m *clusterMember, since time.Time) time.Duration {
	eventually(c.t, 60*time.Second, "a renewal through "+m.name+" again", func() (bool, string) {
		return r.hist.succeededThrough(c.index(m), since), "none yet"
	})
	return time.Since(since)
}

// electorFailover waits, when the elector on m led at the fault, for
// another to lead, and returns how long after at that was.
func (c *faultCluster) electorFailover(ledBefore string, m *clusterMember, at time.Time, what string) {
	if ledBefore != "e-"+m.name {
		return
	}
	eventually(c.t, 30*time.Second, "another elector leads after "+what, func() (bool, string) {
		c.lt.mu.Lock()
		defer c.lt.mu.Unlock()
		for id, on := range c.lt.leading {
			if on && id != ledBefore {
				return true, ""
			}
		}
		return false, fmt.Sprintf("leading %v", c.lt.leading)
	})
	c.mu.Lock()
	var took time.Duration
	for _, s := range c.starts {
		if s.at.After(at) && s.id != ledBefore {
			took = s.at.Sub(at)
			break
		}
	}
	c.mu.Unlock()
	c.measure("elector failover ("+faultLeaseDuration.String()+" leases) after "+what+" of the leader's member", took)
}

// etcdLeader asks m for the etcd leader's name.
func (c *faultCluster) etcdLeader(m *clusterMember) string {
	st, err := m.status(c.t)
	if err != nil {
		return ""
	}
	return st.Leader
}

// pause stops m with SIGSTOP: the others go on, the electors on m lose
// leadership before another takes it (the overlap check), and after
// SIGCONT m steps down if it led etcd, catches up and serves again.
func (c *faultCluster) pause(r *faultRound, m *clusterMember) {
	t := c.t
	t.Helper()
	wasEtcdLeader := c.etcdLeader(m) == m.name
	led := c.leadingElector()
	t.Logf("SIGSTOP %s (etcd leader: %t; elector leading: %s)", m.name, wasEtcdLeader, led)
	paused := time.Now()
	if err := m.ts.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", m.name, err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = m.ts.proc.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	c.measure(fmt.Sprintf("first renewal through the others after SIGSTOP of a member (etcd leader: %t)", wasEtcdLeader), c.nextRenewal(r, paused, m))
	c.electorFailover(led, m, paused, "SIGSTOP")
	if wasEtcdLeader {
		other := c.members[(c.index(m)+1)%len(c.members)]
		eventually(t, 30*time.Second, "a new etcd leader while "+m.name+" is stopped", func() (bool, string) {
			l := c.etcdLeader(other)
			return l != "" && l != m.name, "leader " + l
		})
	}

	cont := time.Now()
	if err := m.ts.proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %s: %v", m.name, err)
	}
	resumed = true
	c.measure("first renewal through a member after its SIGCONT", c.servesAgain(r, m, cont))
	st := m.waitHealthy(t, 3)
	if wasEtcdLeader && st.Leader == m.name {
		t.Logf("%s leads etcd again after SIGCONT (a later election)", m.name)
	}
	c.electorsAgree()
}

// electorsAgree waits until every elector sees the one leader.
func (c *faultCluster) electorsAgree() {
	eventually(c.t, 30*time.Second, "every elector sees the leader", func() (bool, string) {
		var leader string
		c.lt.mu.Lock()
		for id, on := range c.lt.leading {
			if on {
				leader = id
			}
		}
		c.lt.mu.Unlock()
		if leader == "" {
			return false, "nobody leads"
		}
		for _, e := range c.electors {
			if got := e.leader(); got != leader {
				return false, e.id + " sees " + got + ", leader " + leader
			}
		}
		return true, ""
	})
}

// controllerRunning reads m's leasehold_election_controller_running gauge;
// ok is false when m does not answer.
func controllerRunning(m *clusterMember) (running, ok bool) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(m.ts.URL + "/metrics")
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "leasehold_election_controller_running "); found {
			return v == "1", resp.StatusCode == http.StatusOK
		}
	}
	return false, false
}

// controllerMember waits until exactly one member runs the election
// controller and returns it.
func (c *faultCluster) controllerMember() *clusterMember {
	var holder *clusterMember
	eventually(c.t, 30*time.Second, "one member runs the election controller", func() (bool, string) {
		var running []string
		holder = nil
		for _, m := range c.members {
			if on, _ := controllerRunning(m); on {
				running = append(running, m.name)
				holder = m
			}
		}
		return len(running) == 1, fmt.Sprintf("running on %q", running)
	})
	return holder
}

// kill crashes m with SIGKILL: the others go on; if m ran the election
// controller, a survivor runs it and decides a coordinated lease whose
// candidates appear after the kill; m restarts from its data directory
// and serves again.
func (c *faultCluster) kill(r *faultRound, m *clusterMember) {
	t := c.t
	t.Helper()
	wasEtcdLeader := c.etcdLeader(m) == m.name
	ranController := false
	if on, _ := controllerRunning(m); on {
		ranController = true
	}
	led := c.leadingElector()
	t.Logf("SIGKILL %s (etcd leader: %t; election controller: %t; elector leading: %s)", m.name, wasEtcdLeader, ranController, led)
	killed := time.Now()
	m.ts.proc.kill()
	c.measure(fmt.Sprintf("first renewal through the others after SIGKILL of a member (etcd leader: %t)", wasEtcdLeader), c.nextRenewal(r, killed, m))
	c.electorFailover(led, m, killed, "SIGKILL")
	if ranController {
		c.controllerMovedAndDecides(m, killed)
	}

	restarted := time.Now()
	m.start(t)
	c.measure("restart of a killed member until ready", m.startedAt.Sub(restarted))
	c.measure("first renewal through a restarted member after its start", c.servesAgain(r, m, m.startedAt))
	m.waitHealthy(t, 3)
	c.electorsAgree()
}

// controllerMovedAndDecides waits for a survivor of dead to run the
// election controller, then runs two coordinated candidates on the
// survivors for a fresh lease: the controller must grant it to the oldest
// emulation version.
func (c *faultCluster) controllerMovedAndDecides(dead *clusterMember, killed time.Time) {
	t := c.t
	t.Helper()
	var survivors []*clusterMember
	for _, m := range c.members {
		if m != dead {
			survivors = append(survivors, m)
		}
	}
	eventually(t, 30*time.Second, "a survivor runs the election controller", func() (bool, string) {
		for _, m := range survivors {
			if on, _ := controllerRunning(m); on {
				return true, ""
			}
		}
		return false, "none yet"
	})
	c.measure("election controller running on a survivor after SIGKILL of its member", time.Since(killed))

	lease := fmt.Sprintf("faults-cle-%03d", c.round)
	clt := &leaderTracker{leading: map[string]bool{}}
	// The candidates' names are the round's own: client-go's candidate
	// renews an existing LeaseCandidate of its name as it is, without
	// setting spec.leaseName, so a name used in an earlier round would
	// keep standing for that round's lease and this one get no candidate.
	olderID, newerID := lease+"-old-"+survivors[0].name, lease+"-new-"+survivors[1].name
	older := startMember(t, survivors[0].ts, clt, lease, olderID, "1.31.0", "1.30.0", string(coordinationv1.OldestEmulationVersion))
	newer := startMember(t, survivors[1].ts, clt, lease, newerID, "1.31.0", "1.31.0", string(coordinationv1.OldestEmulationVersion))
	defer older.kill()
	defer newer.kill()
	candidates := clientset(t, restConfig(t, survivors[0].ts, wireProtobuf)).CoordinationV1beta1().LeaseCandidates("kube-system")
	eventually(t, 30*time.Second, "both candidates registered for "+lease, func() (bool, string) {
		var got []string
		for _, id := range []string{olderID, newerID} {
			lc, err := candidates.Get(c.ctx, id, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if lc.Spec.LeaseName != lease {
				t.Fatalf("candidate %s stands for lease %s, not %s", id, lc.Spec.LeaseName, lease)
			}
			got = append(got, id)
		}
		return true, fmt.Sprintf("registered %q", got)
	})
	// Under load the second candidate may register after the first
	// grant's wait (--election-first-grant-wait): the controller then
	// hands the lease over to the older one (preferredHolder).
	first := waitLeader(t, clt, 1, 30*time.Second)
	c.measure("coordinated lease decided after SIGKILL of the controller's member (candidates started after the kill)", time.Since(killed))
	if first != older.id {
		t.Logf("coordinated lease %s first granted to %s; waiting for the hand-over to %s", lease, first, older.id)
		eventually(t, 30*time.Second, older.id+" leads "+lease, func() (bool, string) {
			starts, _ := clt.snapshot()
			return clt.isLeading(older.id), fmt.Sprintf("leadership starts %q", starts)
		})
	}
	if _, overlap := clt.snapshot(); len(overlap) > 0 {
		t.Errorf("two coordinated leaders at once: %q", overlap)
	}
}

// fillDisk fills the filesystem under the small member while it runs.
// etcd treats a failed write of its log or database as fatal: the member
// exits non-zero and says why, and never serves from a half-written
// store. The other two keep the quorum and serve; once space is freed,
// the member restarts from its data directory and catches up.
func (c *faultCluster) fillDisk(r *faultRound) {
	t := c.t
	t.Helper()
	m := c.small
	wasEtcdLeader := c.etcdLeader(m) == m.name
	led := c.leadingElector()
	t.Logf("filling the disk of %s (etcd leader: %t; elector leading: %s)", m.name, wasEtcdLeader, led)
	filler := filepath.Join(c.mnt, "filler")
	filled := time.Now()
	fillDisk(t, filler)
	defer os.Remove(filler)

	// The renewals alone may never need a new page: the store compacts
	// old revisions and etcd's database reuses their pages. Large leases
	// written through another member need new pages on every member.
	other := c.members[(c.index(m)+1)%len(c.members)]
	big := c.leases(other, wireJSON)
	var bigNames []string
	// The large leases go at the end of the round, so that the database
	// does not grow round after round (etcd reuses the freed pages).
	defer func() {
		for _, name := range bigNames {
			if err := big.Delete(c.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting the large lease %s: %v", name, err)
			}
		}
	}()
	var exited time.Time
	eventually(t, 60*time.Second, m.name+" stops on its full disk", func() (bool, string) {
		select {
		case <-m.ts.proc.exited:
			exited = time.Now()
			return true, ""
		default:
		}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "faults-big-", Annotations: map[string]string{"pad": strings.Repeat("x", 200<<10)}}}
		created, err := big.Create(c.ctx, l, metav1.CreateOptions{})
		if err != nil {
			return false, "still running; a large write through " + other.name + ": " + err.Error()
		}
		bigNames = append(bigNames, created.Name)
		return false, "still running"
	})
	log := m.ts.Log()
	c.measure("member exit after its disk filled up", exited.Sub(filled))
	if m.ts.proc.code == 0 {
		t.Errorf("%s exited with code 0 on a full disk", m.name)
	}
	if !strings.Contains(log, "no space left on device") || !strings.Contains(log, "The embedded etcd member cannot go on and stops this process") {
		t.Errorf("%s's log does not name the full disk and say what it means:\n%s", m.name, tail(log, 40))
	}
	t.Logf("%s exited with code %d; its last lines:\n%s", m.name, m.ts.proc.code, tail(log, 6))
	c.measure(fmt.Sprintf("first renewal through the others after a member stopped on a full disk (etcd leader: %t)", wasEtcdLeader), c.nextRenewal(r, exited, m))
	c.electorFailover(led, m, exited, "disk full")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	m.start(t)
	c.measure("first renewal through the member restarted after space was freed", c.servesAgain(r, m, m.startedAt))
	m.waitHealthy(t, 3)
	c.electorsAgree()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkSameData lists namespace default through every member: the same
// leases at the same resourceVersions (the writers have stopped).
func (c *faultCluster) checkSameData() {
	t := c.t
	t.Helper()
	var first map[string]string
	for _, m := range c.members {
		var got map[string]string
		eventually(t, 20*time.Second, "list through "+m.name, func() (bool, string) {
			list, err := c.leases(m, wireJSON).List(c.ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			got = map[string]string{}
			for _, l := range list.Items {
				got[l.Name] = l.ResourceVersion + "/" + deref(l.Spec.HolderIdentity)
			}
			return true, ""
		})
		if first == nil {
			first = got
			continue
		}
		for name, v := range first {
			if got[name] != v {
				t.Errorf("lease %s through %s: %q, through %s: %q", name, m.name, got[name], c.members[0].name, v)
			}
		}
		if len(got) != len(first) {
			t.Errorf("%d leases through %s, %d through %s", len(got), m.name, len(first), c.members[0].name)
		}
	}
}

// faultScheduleFromEnv reads the randomized schedule's length from
// LEASEHOLD_FAULT_DURATION and its seed from LEASEHOLD_FAULT_SEED (new one
// when unset, logged so that a failing run can be replayed); ok is false
// when no randomized schedule is asked for.
func faultScheduleFromEnv(t *testing.T) (d time.Duration, rng *rand.Rand, ok bool) {
	t.Helper()
	duration := os.Getenv(faultDurationEnv)
	if duration == "" {
		return 0, nil, false
	}
	d, err := time.ParseDuration(duration)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10m", faultDurationEnv, duration)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(faultSeedEnv); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", faultSeedEnv, s)
		}
	}
	t.Logf("%s: randomized fault schedule for %v, seed %d (%s=%d replays it)", t.Name(), d, seed, faultSeedEnv, seed)
	return d, rand.New(rand.NewPCG(seed, seed)), true
}

// schedule runs random faults on random members for d.
func (c *faultCluster) schedule(d time.Duration, rng *rand.Rand) {
	t := c.t
	end := time.Now().Add(d)
	for n := 0; time.Now().Before(end); n++ {
		target := c.members[rng.IntN(len(c.members))]
		switch rng.IntN(5) {
		case 0: // the member that leads etcd
			target = c.byName(c.etcdLeader(c.members[0]), target)
			c.runRound("sigstop-etcd-leader", func(r *faultRound) { c.pause(r, target) })
		case 1:
			c.runRound("sigstop", func(r *faultRound) { c.pause(r, target) })
		case 2:
			c.runRound("sigkill-controller", func(r *faultRound) { c.kill(r, c.controllerMember()) })
		case 3:
			c.runRound("sigkill", func(r *faultRound) { c.kill(r, target) })
		case 4:
			c.runRound("disk-full", func(r *faultRound) { c.fillDisk(r) })
		}
		// A pause between faults, random as the faults are: the cluster
		// must not only survive faults back to back.
		select {
		case <-time.After(time.Duration(rng.IntN(3000)) * time.Millisecond):
		case <-c.ctx.Done():
		}
		if t.Failed() {
			t.Fatalf("stopping the schedule after round %d", c.round)
		}
	}
}

// byName is the member called name, or fallback.
func (c *faultCluster) byName(name string, fallback *clusterMember) *clusterMember {
	for _, m := range c.members {
		if m.name == name {
			return m
		}
	}
	return fallback
}
