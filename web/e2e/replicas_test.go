package e2e

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/leasehold/leasehold/storage/etcd"
	"github.com/leasehold/leasehold/storage/etcd/etcdtest"
)

// replicaProcess is a leasehold server in a child process that is
// crashed with SIGKILL.
type replicaProcess struct {
	URL     string
	proc    *serverProcess
	leading chan struct{} // closed when it logs that it leads the controller
}

func startReplicaProcess(t *testing.T, args ...string) *replicaProcess {
	t.Helper()
	all := append([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "info", "--write-kubeconfig", "-"}, args...)
	r := &replicaProcess{leading: make(chan struct{})}
	var once sync.Once
	p, ready := spawnServer(t, all, func(line string) {
		if strings.Contains(line, "msg=Leading") && strings.Contains(line, "election=election-controller") {
			once.Do(func() { close(r.leading) })
		}
	})
	r.proc = p
	t.Cleanup(func() {
		r.Kill()
		if t.Failed() {
			t.Logf("replica process log:\n%s", p.log.String())
		}
	})
	if !ready {
		t.Fatalf("replica process exited before it was ready:\n%s", p.log.String())
	}
	r.URL = "http://" + p.hostPort()
	return r
}

// Kill crashes the process (SIGKILL: no resignation, no cleanup).
func (r *replicaProcess) Kill() { r.proc.kill() }

// controllerHolder returns the identity ("host/pid/nonce") of the replica
// that leads the election controller, read from etcd.
func controllerHolder(ctx context.Context, cli *clientv3.Client, prefix string) string {
	resp, err := cli.Get(ctx, etcd.ElectionPrefix(prefix, "election-controller"), clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// TestE2EReplicasOnEtcd runs three leasehold replicas on a three-member
// etcd cluster: a write through one replica is read and watched through
// another, a stale write through a third replica gets 409, and when the
// etcd leader and the replica running the election controller are killed
// together under renewal load, no acknowledged renewal is lost, another
// replica's controller takes over within a few seconds and coordinated
// elections go on.
func TestE2EReplicasOnEtcd(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 3)
	const prefix = "/e2e-replicas"
	args := []string{"--storage", "etcd", "--etcd-endpoints", strings.Join(cl.Endpoints(), ","), "--etcd-prefix", prefix}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The first replica is a child process, so it can crash; started first,
	// it runs the election controller.
	r0 := startReplicaProcess(t, args...)
	select {
	case <-r0.leading:
	case <-time.After(10 * time.Second):
		t.Fatalf("the first replica does not lead the controller:\n%s", r0.proc.log.String())
	}
	r1, r2 := startServer(t, args...), startServer(t, args...)
	leases1 := clientset(t, restConfig(t, r1, wireProtobuf)).CoordinationV1().Leases("default")
	leases2 := clientset(t, restConfig(t, r2, wireJSON)).CoordinationV1().Leases("default")

	// Write through r1; read and watch through r2.
	list, err := leases2.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := leases2.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, err := leases1.Create(ctx, newLease("shared", nil, "r1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := leases2.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != created.ResourceVersion || *got.Spec.HolderIdentity != "r1" {
		t.Fatalf("read through r2 after a write through r1: %v %v", got, err)
	}
	select {
	case ev := <-w.ResultChan():
		l, ok := ev.Object.(*coordinationv1.Lease)
		if ev.Type != watch.Added || !ok || l.Name != "shared" || l.ResourceVersion != created.ResourceVersion {
			t.Fatalf("watch through r2: %s %#v", ev.Type, ev.Object)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch through r2 did not see the write through r1")
	}

	// A conflict across replicas: r2 updates, then r1 writes from the stale
	// resourceVersion.
	got.Spec.HolderIdentity = ptrTo("r2")
	if _, err := leases2.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	created.Spec.HolderIdentity = ptrTo("stale")
	if _, err := leases1.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update through r1 after an update through r2: %v, want 409 Conflict", err)
	}

	// Coordinated election: candidates talk to r1 and r2, the controller
	// runs in r0.
	lt := &leaderTracker{leading: map[string]bool{}}
	m130 := startCLEMember(t, r1, lt, "kcm-130", "1.31.0", "1.30.0")
	startCLEMember(t, r2, lt, "kcm-131", "1.31.0", "1.31.0")
	if who := waitLeader(t, lt, 1, 20*time.Second); who != "kcm-130" {
		t.Fatalf("first coordinated leader = %s, want kcm-130", who)
	}
	live := cl.Leader(t)
	var survivors []string
	for _, m := range cl.Members {
		if m != live {
			survivors = append(survivors, m.ClientURL)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: survivors, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if h := controllerHolder(ctx, cli, prefix); !strings.Contains(h, "/"+strconv.Itoa(r0.proc.cmd.Process.Pid)+"/") {
		t.Fatalf("controller held by %q, want the child process %d", h, r0.proc.cmd.Process.Pid)
	}

	load := startRenewalLoad(t, []*testServer{r1, r2}, 16)
	time.Sleep(2 * time.Second)

	// Crash the etcd leader, the controller's replica and the coordinated
	// leader at once.
	live.Kill()
	r0.Kill()
	m130.kill()
	killed := time.Now()
	load.mark()
	r1Pid, r2Pid := "/"+strconv.Itoa(r1.Pid())+"/", "/"+strconv.Itoa(r2.Pid())+"/"
	eventually(t, 15*time.Second, "another replica leads the controller", func() (bool, string) {
		h := controllerHolder(ctx, cli, prefix)
		return strings.Contains(h, r1Pid) || strings.Contains(h, r2Pid), h
	})
	takeover := time.Since(killed)
	if who := waitLeader(t, lt, 2, 20*time.Second); who != "kcm-131" {
		t.Fatalf("coordinated leader after the crash = %s, want kcm-131", who)
	}
	failover := time.Since(killed)
	time.Sleep(time.Second)
	before, after := load.stop()
	t.Logf("controller take-over %v, coordinated failover %v; acknowledged renewals: %d before, %d after the crash",
		takeover.Round(10*time.Millisecond), failover.Round(10*time.Millisecond), before, after)
	if takeover > 8*time.Second {
		t.Errorf("controller take-over took %v", takeover)
	}
	if after == 0 {
		t.Error("no renewal was acknowledged after the crash")
	}
	load.verify(t, leases2)
}

func ptrTo[T any](v T) *T { return &v }

// renewalLoad renews its own leases through several replicas (GET, then
// PUT with leaseTransitions+1) and remembers, per lease, the highest count
// acknowledged and the highest attempted.
type renewalLoad struct {
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	names        []string
	acked, tried []atomic.Int32
	total        atomic.Int64
	atMark       atomic.Int64
}

func startRenewalLoad(t *testing.T, servers []*testServer, n int) *renewalLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &renewalLoad{cancel: cancel, acked: make([]atomic.Int32, n), tried: make([]atomic.Int32, n)}
	t.Cleanup(cancel)
	for i := range n {
		cfg := restConfig(t, servers[i%len(servers)], wireProtobuf)
		cfg.Timeout = 2 * time.Second // a write stuck in an etcd election is retried
		leases := clientset(t, cfg).CoordinationV1().Leases("default")
		name := fmt.Sprintf("load-%02d", i)
		l.names = append(l.names, name)
		lease := newLease(name, nil, "loader")
		lease.Spec.LeaseTransitions = ptrTo(int32(0))
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		l.wg.Go(func() { l.renew(ctx, leases, i) })
	}
	return l
}

func (l *renewalLoad) renew(ctx context.Context, leases typedcoordinationv1.LeaseInterface, i int) {
	for ctx.Err() == nil {
		cur, err := leases.Get(ctx, l.names[i], metav1.GetOptions{})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		next := *cur.Spec.LeaseTransitions + 1
		cur.Spec.LeaseTransitions = &next
		cur.Spec.RenewTime = nowMicro()
		l.tried[i].Store(next)
		if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
			l.acked[i].Store(next)
			l.total.Add(1)
		}
	}
}

// mark notes the acknowledged count at the crash.
func (l *renewalLoad) mark() { l.atMark.Store(l.total.Load()) }

// stop ends the load and returns the acknowledged renewals before and
// after the mark.
func (l *renewalLoad) stop() (before, after int64) {
	l.cancel()
	l.wg.Wait()
	return l.atMark.Load(), l.total.Load() - l.atMark.Load()
}

// verify reads every lease back: each must hold at least its last
// acknowledged count (and no more than was attempted).
func (l *renewalLoad) verify(t *testing.T, leases typedcoordinationv1.LeaseInterface) {
	t.Helper()
	for i, name := range l.names {
		cur, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("read back %s: %v", name, err)
		}
		got, acked, tried := *cur.Spec.LeaseTransitions, l.acked[i].Load(), l.tried[i].Load()
		if got < acked || got > tried {
			t.Errorf("%s: stored count %d, acknowledged %d, attempted %d: an acknowledged renewal was lost", name, got, acked, tried)
		}
	}
}

// BenchmarkRenewals measures lease renewals (a GET and a PUT each) by 64
// concurrent clients over 256 leases: one server on bbolt, then one and
// three replicas on a three-member etcd cluster, everything on this
// machine. The README's figures come from
//
//	go test -run '^$' -bench Renewals -benchtime 10s .
func BenchmarkRenewals(b *testing.B) {
	cl := etcdtest.Start(b, 3)
	etcdArgs := func(prefix string) []string {
		return []string{"--storage", "etcd", "--etcd-endpoints", strings.Join(cl.Endpoints(), ","), "--etcd-prefix", prefix}
	}
	for _, c := range []struct {
		name     string
		replicas int
		args     []string
	}{
		{"bbolt-1-server", 1, nil},
		{"etcd-1-replica", 1, etcdArgs("/bench-1")},
		{"etcd-3-replicas", 3, etcdArgs("/bench-3")},
	} {
		var clients []typedcoordinationv1.LeaseInterface
		var servers []*testServer
		for range c.replicas {
			ts := startServer(b, c.args...)
			servers = append(servers, ts)
			clients = append(clients, clientset(b, restConfig(b, ts, wireProtobuf)).CoordinationV1().Leases("default"))
		}
		var names []string
		for i := range 256 {
			name := fmt.Sprintf("bench-%03d", i)
			if _, err := clients[0].Create(context.Background(), newLease(name, nil, "bench"), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			names = append(names, name)
		}
		b.Run(c.name, func(b *testing.B) { benchRenewals(b, clients, names) })
		for _, ts := range servers {
			ts.Stop(b)
		}
	}
}

// benchRenewals runs 64 workers; worker w renews leases w, w+64, ...
// through replica w mod len(clients), so no two workers share a lease.
func benchRenewals(b *testing.B, clients []typedcoordinationv1.LeaseInterface, names []string) {
	const workers = 64
	b.SetParallelism(max(1, workers/runtime.GOMAXPROCS(0)))
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(next.Add(1) - 1)
		leases := clients[w%len(clients)]
		var mine []time.Duration
		for i := w; pb.Next(); i += workers {
			start := time.Now()
			name := names[i%len(names)]
			cur, err := leases.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				b.Error(err)
				return
			}
			cur.Spec.RenewTime = nowMicro()
			if _, err := leases.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "renewals/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
