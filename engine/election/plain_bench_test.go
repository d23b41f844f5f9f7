package election

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/plugins/abi"
)

// plainLeases is how many ordinary client-go leases the benchmark keeps.
const plainLeases = 10000

// plainLease is a lease as client-go's plain (uncoordinated) leader
// election writes it: no strategy, no preferredHolder.
func plainLease(name, holder string, now time.Time) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(now)
	dur := int32(15)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur,
			AcquireTime: &rt, RenewTime: &rt},
	}
}

func plainLeaseName(i int) string { return fmt.Sprintf("plain-%05d", i) }

// renewLease sets renewTime=now on a lease, as its holder does.
func (env *testEnv) renewLease(ctx context.Context, name string) {
	env.t.Helper()
	o, err := env.e.Get(ctx, env.leases, name, &metav1.GetOptions{})
	if err != nil {
		env.t.Fatalf("get lease %s: %v", name, err)
	}
	l := o.(*coordinationv1.Lease).DeepCopy()
	rt := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &rt
	if _, _, err := env.e.Update(ctx, env.leases, name, l, &metav1.UpdateOptions{}); err != nil {
		env.t.Fatalf("renew lease %s: %v", name, err)
	}
}

// drained waits until the controller has applied every lease event up to
// now and its worker has nothing left to do: a coordinated sentinel lease
// written last is cached once the (ordered) watch got that far.
func (env *testEnv) drained(sentinel string) {
	env.t.Helper()
	st := coordinationv1.CoordinatedLeaseStrategy(abi.BuiltinStrategy)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: sentinel}, Spec: coordinationv1.LeaseSpec{Strategy: &st}}
	o, err := env.e.Create(context.Background(), env.leases, l, &metav1.CreateOptions{})
	if err != nil {
		env.t.Fatalf("create sentinel: %v", err)
	}
	rv := rvOf(o.(*coordinationv1.Lease))
	env.eventually(20*time.Second, "controller drained", func() bool {
		env.c.mu.Lock()
		defer env.c.mu.Unlock()
		e := env.c.leases[leaseKey{testNS, sentinel}]
		return e != nil && rvOf(e.obj) >= rv && len(env.c.dirty) == 0
	})
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkPlainLeases runs an engine holding 10,000 plain leases that
// coordinated election has nothing to do with, without and with the
// controller. Each op is one renewal of one of them through the engine
// (run with -benchtime=10000x to renew each once). After the renewals it
// reports the live heap (heap-B) and how many leases the controller
// caches: the controller's cost is the difference between the two
// sub-benchmarks' heap-B.
func BenchmarkPlainLeases(b *testing.B) {
	b.Run("engine-only", func(b *testing.B) { benchPlainLeases(b, false) })
	b.Run("controller", func(b *testing.B) { benchPlainLeases(b, true) })
}

func benchPlainLeases(b *testing.B, controller bool) {
	env := newEnv(b, fastOptions())
	ctx := context.Background()
	now := time.Now()
	for i := range plainLeases {
		if _, err := env.e.Create(ctx, env.leases, plainLease(plainLeaseName(i), "holder", now), &metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if controller {
		env.run()
		env.drained("sentinel-0")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		env.renewLease(ctx, plainLeaseName(i%plainLeases))
	}
	b.StopTimer()
	cached := 0
	if controller {
		env.drained("sentinel-1")
		env.c.mu.Lock()
		cached = len(env.c.leases)
		env.c.mu.Unlock()
	}
	b.ReportMetric(float64(liveHeap()), "heap-B")
	b.ReportMetric(float64(cached), "cached-leases")
}
