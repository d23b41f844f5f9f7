package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// clusterMember is one "leasehold serve --cluster-init/--join" process.
type clusterMember struct {
	name    string
	dataDir string
	args    []string
	// bin is the leasehold binary the member runs: the one under test
	// when empty, another release's in the upgrade tests.
	bin string
	ts  *testServer
	// startedAt is when the current process was ready.
	startedAt time.Time
}

// clusterStatus is "leasehold cluster status -o json".
type clusterStatus struct {
	Self    string `json:"self"`
	Leader  string `json:"leader"`
	Members []struct {
		Name      string `json:"name"`
		Leader    bool   `json:"leader"`
		Healthy   bool   `json:"healthy"`
		Learner   bool   `json:"learner"`
		RaftIndex uint64 `json:"raftIndex"`
		DBSize    int64  `json:"dbSizeBytes"`
	} `json:"members"`
	SlowLeader *struct {
		Leader       string `json:"leader"`
		Healthier    string `json:"healthier"`
		SinceSeconds int64  `json:"sinceSeconds"`
	} `json:"slowLeader"`
	QuorumRoundTripMs int64 `json:"quorumRoundTripMs"`
}

// handedOut holds every port freeLoopbackPorts returned in this test
// process: none is returned twice. A test binds its ports when its
// members start, and again at each restart, minutes after it chose them;
// a port that is free while its member is stopped must not go to another
// test meanwhile (parallel tests chose ports from the same range).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freeLoopbackPorts finds n free ports below the kernel's ephemeral range
// (32768 and up by default), so that no outgoing connection of an earlier
// member takes one before its member binds it, and that no other test of
// this process was given (handedOut).
func freeLoopbackPorts(t *testing.T, n int) []int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("no %d free loopback ports in 20000-32000", n)
		}
		port := 20000 + rand.IntN(12000)
		if handedOut.ports[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		handedOut.ports[port] = true
		ports = append(ports, port)
	}
	return ports
}

// start runs the member (again, after a kill: its data directory alone
// brings it back).
func (m *clusterMember) start(t *testing.T) {
	t.Helper()
	args := append([]string{"--listen", "127.0.0.1:0", "--data-dir", m.dataDir, "--log-level", "info"}, m.args...)
	if m.ts != nil {
		// A restart keeps its URL, for the clients that use it, and
		// needs no cluster flag: the data directory says it all.
		args = []string{"--listen", m.ts.proc.hostPort(), "--data-dir", m.dataDir, "--log-level", "info"}
	}
	bin := m.bin
	if bin == "" {
		bin = leaseholdBinary(t)
	}
	p, ready := spawnBinary(t, bin, nil, args, nil)
	if !ready {
		t.Fatalf("member %s exited with code %d before it was ready; log:\n%s", m.name, p.code, p.log.String())
	}
	m.startedAt = time.Now()
	m.ts = &testServer{URL: "http://" + p.hostPort(), DataDir: m.dataDir, Kubeconfig: filepath.Join(m.dataDir, "kubeconfig"), proc: p}
}

func (m *clusterMember) status(t *testing.T) (clusterStatus, error) {
	t.Helper()
	code, out, errOut := runCLI(t, "cluster", "status", "-o", "json", "--timeout", "5s", "--kubeconfig", m.ts.Kubeconfig)
	var st clusterStatus
	if code != 0 {
		return st, fmt.Errorf("leasehold cluster status: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, fmt.Errorf("decode %q: %w", out, err)
	}
	return st, nil
}

// waitHealthy waits until m sees want healthy voting members and a leader.
func (m *clusterMember) waitHealthy(t *testing.T, want int) clusterStatus {
	t.Helper()
	return waitHealthyVoters(t, m.name, want, func() (clusterStatus, error) { return m.status(t) })
}

// waitHealthyVoters waits until status (member name's view) shows want
// healthy voting members and a leader.
func waitHealthyVoters(t *testing.T, name string, want int, status func() (clusterStatus, error)) clusterStatus {
	t.Helper()
	var st clusterStatus
	eventually(t, 60*time.Second, name+" sees "+strconv.Itoa(want)+" healthy voters", func() (bool, string) {
		var err error
		if st, err = status(); err != nil {
			return false, err.Error()
		}
		healthy := 0
		for _, mem := range st.Members {
			if mem.Healthy && !mem.Learner {
				healthy++
			}
		}
		return healthy == want && st.Leader != "", fmt.Sprintf("%+v", st)
	})
	return st
}

// startCluster runs three members on loopback: m1 starts the cluster, m2
// joins through m1 and m3 through m2 (any member admits joiners).
func startCluster(t *testing.T) []*clusterMember {
	t.Helper()
	return startClusterIn(t, nil)
}

// startClusterIn is startCluster with member i's data directory
// dataDirs[i] where given and not empty (a small filesystem to fill, say),
// a fresh temporary directory otherwise.
func startClusterIn(t *testing.T, dataDirs []string) []*clusterMember {
	t.Helper()
	return startClusterOf(t, dataDirs, "")
}

// startClusterOf is startClusterIn with every member running the leasehold
// binary bin (the one under test when empty), extra added to every
// member's serve flags.
func startClusterOf(t *testing.T, dataDirs []string, bin string, extra ...string) []*clusterMember {
	t.Helper()
	ports := freeLoopbackPorts(t, 6)
	var members []*clusterMember
	for i := range 3 {
		m := &clusterMember{name: fmt.Sprintf("m%d", i+1), dataDir: t.TempDir(), bin: bin}
		if i < len(dataDirs) && dataDirs[i] != "" {
			m.dataDir = dataDirs[i]
		}
		m.args = []string{"--cluster-token", "e2e-cluster-token", "--member-name", m.name,
			"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			"--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		m.args = append(m.args, extra...)
		if i == 0 {
			m.args = append(m.args, "--cluster-init")
		} else {
			m.args = append(m.args, "--join", members[i-1].ts.URL)
		}
		m.start(t)
		members = append(members, m)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("member %s log:\n%s", m.name, m.ts.Log())
			}
		})
	}
	members[2].waitHealthy(t, 3)
	return members
}

// TestClusterFailover runs a 3-member cluster as real processes, one
// client-go elector on each member, and SIGKILLs the member holding the
// etcd leader: renewals go on through the others within a few seconds,
// exactly one elector leads again, and the killed member rejoins from its
// data directory. Then two members die: the last one, without a quorum,
// answers writes with a 5xx Status within its request timeout and ends its
// watches.
func TestClusterFailover(t *testing.T) {
	testneeds.Slow(t, "a three-member embedded etcd cluster through failovers")
	t.Parallel()
	members := startCluster(t)
	ctx := context.Background()
	st := members[0].waitHealthy(t, 3)
	byName := map[string]*clusterMember{}
	for _, m := range members {
		byName[m.name] = m
	}
	etcdLeader := byName[st.Leader]

	lt := &leaderTracker{leading: map[string]bool{}}
	var electors []*elector
	for _, m := range members {
		e := startElector(t, m.ts, lt, "e-"+m.name)
		electors = append(electors, e)
		t.Cleanup(func() { e.cancel(); <-e.done })
	}
	first := waitLeader(t, lt, 1, 20*time.Second)
	t.Logf("etcd leader %s, elector leading %s", etcdLeader.name, first)

	// A renewal writer on every member, each through its own member,
	// all on one lease: every read and write is recorded for the
	// linearizability check, and the successful writes time the failover.
	var survivors []*clusterMember
	for _, m := range members {
		if m != etcdLeader {
			survivors = append(survivors, m)
		}
	}
	hist := &leaseHistory{}
	first0 := clientset(t, restConfig(t, members[0].ts, wireProtobuf)).CoordinationV1().Leases("default")
	init := "init"
	if _, err := first0.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &init}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create probe lease: %v", err)
	}
	stopRenew := make(chan struct{})
	var writers sync.WaitGroup
	for i, m := range members {
		leases := clientset(t, restConfig(t, m.ts, wireProtobuf)).CoordinationV1().Leases("default")
		writers.Go(func() { hist.renew(ctx, i, leases, stopRenew) })
	}
	eventually(t, 10*time.Second, "probe renewals before the kill", func() (bool, string) {
		n := len(hist.successes(time.Time{}))
		return n >= 6, fmt.Sprintf("%d renewals", n)
	})

	killed := time.Now()
	etcdLeader.ts.proc.kill()
	var firstRenewal time.Duration
	eventually(t, 15*time.Second, "a renewal through a survivor after the kill", func() (bool, string) {
		if after := hist.successes(killed); len(after) > 0 {
			firstRenewal = after[0].Sub(killed)
			return true, ""
		}
		return false, "no renewal yet"
	})
	t.Logf("MEASURED: first successful renewal %v after SIGKILL of the etcd leader's member %s", firstRenewal.Round(time.Millisecond), etcdLeader.name)

	// Leadership goes on: the elector on the killed member (if it led)
	// loses it, and one elector on a survivor leads.
	deadElector := byName[etcdLeader.name]
	for _, e := range electors {
		if e.id == "e-"+deadElector.name {
			e.dead.Store(true)
		}
	}
	var leaderAfter string
	eventually(t, 20*time.Second, "an elector on a survivor leads", func() (bool, string) {
		l, err := probeLeaseHolder(ctx, t, survivors[1].ts)
		if err != nil {
			return false, err.Error()
		}
		leaderAfter = l
		return l != "" && l != "e-"+etcdLeader.name, "holder " + l
	})
	failover := time.Since(killed)
	t.Logf("MEASURED: elector lease held by %s %v after the kill (leases of %v)", leaderAfter, failover.Round(time.Millisecond), leLeaseDuration)
	st = survivors[0].waitHealthy(t, 2)
	if st.Leader == etcdLeader.name || st.Leader == "" {
		t.Errorf("etcd leader after the kill = %q, want a survivor", st.Leader)
	}
	if _, overlap := lt.snapshot(); len(overlap) > 0 {
		t.Errorf("two electors led at once: %q", overlap)
	}

	// The killed member comes back with its data directory alone.
	etcdLeader.start(t)
	etcdLeader.waitHealthy(t, 3)
	eventually(t, 20*time.Second, "a renewal through the restarted member", func() (bool, string) {
		return hist.succeededVia(members, etcdLeader), "none yet"
	})
	close(stopRenew)
	writers.Wait()
	hist.check(t)

	// Quorum lost: only m of the three is left. Writes and linearizable
	// reads fail with a 5xx Status within the request timeout, and an
	// open watch ends.
	last := members[0]
	lastLeases := clientset(t, restConfig(t, last.ts, wireJSON)).CoordinationV1().Leases("default")
	w, err := lastLeases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch on %s: %v", last.name, err)
	}
	defer w.Stop()
	cur, err := lastLeases.Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the probe lease: %v", err)
	}
	for _, e := range electors {
		e.dead.Store(true)
	}
	for _, m := range members[1:] {
		m.ts.proc.kill()
	}
	writeStart := time.Now()
	var failedIn time.Duration
	eventually(t, 30*time.Second, "a write on the quorum-less member fails with 5xx", func() (bool, string) {
		start := time.Now()
		now := metav1.NewMicroTime(time.Now())
		cur.Spec.RenewTime = &now
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := lastLeases.Update(wctx, cur, metav1.UpdateOptions{})
		cancel()
		if err == nil {
			return false, "write succeeded (the member has not noticed yet)"
		}
		st := apiStatus(t, err)
		failedIn = time.Since(start)
		if st.Code < 500 {
			return false, fmt.Sprintf("status %d %s: %s", st.Code, st.Reason, st.Message)
		}
		if failedIn > 10*time.Second {
			t.Errorf("the failed write took %v, want a bounded few seconds", failedIn)
		}
		return true, ""
	})
	t.Logf("MEASURED: without quorum a write failed with 5xx %v after the kills, that request in %v", time.Since(writeStart).Round(time.Millisecond), failedIn.Round(time.Millisecond))
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = lastLeases.Get(rctx, "probe", metav1.GetOptions{})
	cancel()
	if err == nil {
		t.Errorf("a linearizable read succeeded without a quorum")
	} else if st := apiStatus(t, err); st.Code < 500 {
		t.Errorf("a linearizable read without a quorum: status %d, want 5xx", st.Code)
	}
	eventually(t, 20*time.Second, "the watch on the quorum-less member ends", func() (bool, string) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return true, ""
			}
			if ev.Type == watch.Error {
				return true, ""
			}
			return false, "event " + string(ev.Type)
		default:
			return false, "still open"
		}
	})
}

// probeLeaseHolder reads the electors' lease through ts.
func probeLeaseHolder(ctx context.Context, t *testing.T, ts *testServer) (string, error) {
	l, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system").Get(ctx, "e2e-le", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return strings.TrimSpace(*l.Spec.HolderIdentity), nil
}

// leaseHistory records the reads and compare-and-swap writes of one lease
// by several clients, for porcupine.
type leaseHistory struct {
	// lease is the lease's name in namespace default; "probe" when empty.
	lease string

	mu  sync.Mutex
	ops []porcupine.Operation
	ok  []successfulWrite
}

type successfulWrite struct {
	client   int
	call, at time.Time // sent and acknowledged
}

func (h *leaseHistory) name() string {
	if h.lease == "" {
		return "probe"
	}
	return h.lease
}

// casInput is a write of value expecting the lease to hold expect (the
// holder read just before: values are unique, so this is the
// resourceVersion precondition).
type casInput struct{ expect, value string }

// casOutput is a write's outcome: applied, refused (409), or unknown (any
// other error: the write may have been applied).
type casOutput string

type readInput struct{}

// leaseModel is a register read whole and written by compare-and-swap.
var leaseModel = porcupine.Model{
	Init: func() interface{} { return "init" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		cur := state.(string)
		switch in := input.(type) {
		case readInput:
			return output.(string) == cur, cur
		case casInput:
			switch output.(casOutput) {
			case "ok":
				return cur == in.expect, in.value
			case "conflict":
				return cur != in.expect, cur
			default: // unknown: applied if it could be, at its linearization point
				if cur == in.expect {
					return true, in.value
				}
				return true, cur
			}
		}
		return false, state
	},
	DescribeOperation: func(input, output interface{}) string {
		return fmt.Sprintf("%v -> %v", input, output)
	},
}

// renew reads and conditionally updates the probe lease until stop.
func (h *leaseHistory) renew(ctx context.Context, client int, leases typedcoordinationv1.LeaseInterface, stop chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		call := time.Now()
		cur, err := leases.Get(rctx, h.name(), metav1.GetOptions{})
		ret := time.Now()
		cancel()
		if err != nil {
			continue // a failed read has no effect
		}
		expect := *cur.Spec.HolderIdentity
		h.record(porcupine.Operation{ClientId: client, Input: readInput{}, Call: call.UnixNano(), Output: expect, Return: ret.UnixNano()})
		value := fmt.Sprintf("c%d-%d", client, n)
		cur.Spec.HolderIdentity = &value
		now := metav1.NewMicroTime(time.Now())
		cur.Spec.RenewTime = &now
		rctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		call = time.Now()
		_, err = leases.Update(rctx, cur, metav1.UpdateOptions{})
		ret = time.Now()
		cancel()
		out := casOutput("ok")
		switch {
		case err == nil:
			h.mu.Lock()
			h.ok = append(h.ok, successfulWrite{client: client, call: call, at: ret})
			h.mu.Unlock()
		case apierrors.IsConflict(err):
			out = "conflict"
		default:
			out = "unknown"
			ret = time.Unix(0, math.MaxInt64) // may take effect any time later
		}
		h.record(porcupine.Operation{ClientId: client, Input: casInput{expect: expect, value: value}, Call: call.UnixNano(), Output: out, Return: ret.UnixNano()})
	}
}

func (h *leaseHistory) record(op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// successes are the times of the successful writes after since, in order.
func (h *leaseHistory) successes(since time.Time) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []time.Time
	for _, w := range h.ok {
		if w.at.After(since) {
			out = append(out, w.at)
		}
	}
	return out
}

// succeededVia reports a successful write through member m after its
// restart.
func (h *leaseHistory) succeededVia(members []*clusterMember, m *clusterMember) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.ok {
		if members[w.client] == m && w.at.After(m.startedAt) {
			return true
		}
	}
	return false
}

// succeededThrough reports a successful write by client after since.
func (h *leaseHistory) succeededThrough(client int, since time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.ok {
		if w.client == client && w.at.After(since) {
			return true
		}
	}
	return false
}

// check fails the test unless the history is linearizable.
func (h *leaseHistory) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	unknown := 0
	for _, op := range ops {
		if op.Output == casOutput("unknown") {
			unknown++
		}
	}
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(leaseModel, ops, 60*time.Second)
	t.Logf("MEASURED: porcupine checked %d operations on lease %s (%d writes of unknown outcome) in %v: %v", len(ops), h.name(), unknown, time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Ok {
		t.Errorf("the history of lease %s is not linearizable (porcupine: %v)", h.name(), res)
	}
}
