package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkRenewal is client-go's renewal: GET, then PUT of the whole
// object (managedFields included) with a new renewTime and the previous RV.
func BenchmarkRenewal(b *testing.B) {
	env := newTestEnv(b)
	ctx := context.Background()
	sc := env.leases("kube-system")
	env.mustCreate(b, "kube-system", newLease("kube-controller-manager", func(l *coordinationv1.Lease) {
		l.Spec.AcquireTime = &metav1.MicroTime{Time: env.clock.Now()}
		l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now()}
		l.Spec.LeaseTransitions = ptr[int32](0)
	}))
	sc.UserAgent = "kube-controller-manager/v1.37.1 (linux/amd64) kubernetes/abc/leader-election"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := env.e.Get(ctx, sc, "kube-controller-manager", &metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		l := got.(*coordinationv1.Lease)
		l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now().Add(time.Duration(i+1) * time.Millisecond)}
		if _, _, err := env.e.Update(ctx, sc, l.Name, l, &metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet is the read half alone.
func BenchmarkGet(b *testing.B) {
	env := newTestEnv(b)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(b, "default", newLease("g"))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := env.e.Get(ctx, sc, "g", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList10k lists 10,000 leases in one namespace.
func BenchmarkList10k(b *testing.B) {
	env := newTestEnv(b)
	ctx := context.Background()
	sc := env.leases("bench")
	for i := 0; i < 10000; i++ {
		env.mustCreate(b, "bench", newLease(fmt.Sprintf("lease-%05d", i), func(l *coordinationv1.Lease) {
			l.Labels = map[string]string{"i": fmt.Sprint(i % 10)}
		}))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := env.e.List(ctx, sc, &metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(out.(*coordinationv1.LeaseList).Items); n != 10000 {
			b.Fatalf("%d items", n)
		}
	}
}
