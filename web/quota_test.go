package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/storage/boltdb"
)

// TestStorageQuotaKeepsRenewals drives a server whose store has a small
// quota with client-go: merge patches with 200 KB annotations (the
// noisy neighbour's) are refused once they hold a quarter of the quota,
// as kube-apiserver answers etcd's "database space exceeded" (500,
// InternalError), while a leader keeps renewing its lease.
func TestStorageQuotaKeepsRenewals(t *testing.T) {
	const quota = 4 << 20
	base := serveOn(t, newServerStore(t, boltdb.Options{QuotaBytes: quota}, nil))
	c, err := coordinationclient.NewForConfig(&rest.Config{Host: base, UserAgent: "leader-elector/v0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leases := c.Leases("default")
	renew := metav1.NewMicroTime(time.Now())
	leader, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "leader"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptrTo("a"), LeaseDurationSeconds: ptrTo[int32](15), RenewTime: &renew},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	big := strings.Repeat("x", 200_000)
	patched := 0
	for i := 0; ; i++ {
		name := fmt.Sprintf("big-%02d", i)
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"noise":%q}}}`, big)
		_, err := leases.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatalf("patch %d past the quota: %v; want InternalError: ... database space exceeded", i, err)
			}
			break
		}
		patched++
		if i > 100 {
			t.Fatal("a 4 MiB quota took 100 patches of 200 KB")
		}
	}
	if patched != quota/4/200_100 {
		t.Fatalf("%d patches of 200 KB accepted; want %d (a quarter of the %d-byte quota)", patched, quota/4/200_100, quota)
	}

	// The leader renews as if nothing happened.
	for range 5 {
		renew = metav1.NewMicroTime(time.Now())
		leader.Spec.RenewTime = &renew
		if leader, err = leases.Update(ctx, leader, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("renewal beside a store full of large values: %v", err)
		}
	}
	// So do small objects: the rest of the quota is theirs.
	for i := range 20 {
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("small-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("small lease %d beside a store full of large values: %v", i, err)
		}
	}
}
