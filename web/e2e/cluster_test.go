package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// clusterMember is one "leasehold serve --cluster-init/--join" process.
type clusterMember struct {
	name    string
	dataDir string
	args    []string
	ts      *testServer
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
}

// freeLoopbackPorts reserves n ports by listening and closing: the
// servers bind them a moment later (a collision fails the start loudly).
func freeLoopbackPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// start runs the member (again, after a kill: its data directory alone
// brings it back).
func (m *clusterMember) start(t *testing.T) {
	t.Helper()
	args := append([]string{"--listen", "127.0.0.1:0", "--data-dir", m.dataDir, "--log-level", "info"}, m.args...)
	p, ready := spawnServer(t, args, nil)
	if !ready {
		t.Fatalf("member %s exited with code %d before it was ready; log:\n%s", m.name, p.code, p.log.String())
	}
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
	var st clusterStatus
	eventually(t, 60*time.Second, m.name+" sees "+strconv.Itoa(want)+" healthy voters", func() (bool, string) {
		var err error
		if st, err = m.status(t); err != nil {
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
	ports := freeLoopbackPorts(t, 6)
	var members []*clusterMember
	for i := range 3 {
		m := &clusterMember{name: fmt.Sprintf("m%d", i+1), dataDir: t.TempDir()}
		m.args = []string{"--cluster-token", "e2e-cluster-token", "--member-name", m.name,
			"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			"--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
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

	// A renewal writer on every surviving member: the time from the
	// SIGKILL to the first successful write through a survivor.
	var survivors []*clusterMember
	for _, m := range members {
		if m != etcdLeader {
			survivors = append(survivors, m)
		}
	}
	probe := clientset(t, restConfig(t, survivors[0].ts, wireProtobuf)).CoordinationV1().Leases("default")
	hold := "probe"
	created, err := probe.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &hold}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create probe lease: %v", err)
	}
	var renewMu sync.Mutex
	var renewedAt []time.Time
	stopRenew := make(chan struct{})
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		cur := created
		for {
			select {
			case <-stopRenew:
				return
			case <-time.After(50 * time.Millisecond):
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			now := metav1.NewMicroTime(time.Now())
			cur.Spec.RenewTime = &now
			upd, err := probe.Update(rctx, cur, metav1.UpdateOptions{})
			cancel()
			if err != nil {
				if got, gerr := probe.Get(ctx, "probe", metav1.GetOptions{}); gerr == nil {
					cur = got
				}
				continue
			}
			cur = upd
			renewMu.Lock()
			renewedAt = append(renewedAt, time.Now())
			renewMu.Unlock()
		}
	}()
	eventually(t, 10*time.Second, "probe renewals before the kill", func() (bool, string) {
		renewMu.Lock()
		defer renewMu.Unlock()
		return len(renewedAt) >= 3, fmt.Sprintf("%d renewals", len(renewedAt))
	})

	killed := time.Now()
	etcdLeader.ts.proc.kill()
	var firstRenewal time.Duration
	eventually(t, 15*time.Second, "a renewal through a survivor after the kill", func() (bool, string) {
		renewMu.Lock()
		defer renewMu.Unlock()
		for _, at := range renewedAt {
			if at.After(killed) {
				firstRenewal = at.Sub(killed)
				return true, ""
			}
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
	close(stopRenew)
	<-renewDone

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
	for _, e := range electors {
		e.dead.Store(true)
	}
	for _, m := range members[1:] {
		m.ts.proc.kill()
	}
	cur := created // a stale version: even the conflict needs the quorum
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
