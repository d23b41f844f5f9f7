package web_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
)

// TestClientGo drives the server with client-go's typed Lease client,
// which speaks protobuf by default, and its discovery client.
func TestClientGo(t *testing.T) {
	base := startServer(t, nil)
	cfg := &rest.Config{Host: base, UserAgent: "leader-elector/v0.0.0"}
	c, err := coordinationclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leases := c.Leases("default")

	w, err := leases.Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptrTo[int64](10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	renew := metav1.NewMicroTime(time.Now())
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "le"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptrTo("a"), LeaseDurationSeconds: ptrTo[int32](15), RenewTime: &renew},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: created.Name}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v", err)
	}
	got, err := leases.Get(ctx, "le", metav1.GetOptions{})
	if err != nil || *got.Spec.HolderIdentity != "a" {
		t.Fatalf("get: %v %v", got, err)
	}
	got.Spec.HolderIdentity = ptrTo("b")
	updated, err := leases.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || *updated.Spec.HolderIdentity != "b" {
		t.Fatalf("update: %v %v", updated, err)
	}
	if _, err := leases.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v", err)
	}
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := leases.Delete(ctx, "le", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, "le", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v", err)
	}
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		select {
		case ev := <-w.ResultChan():
			if l, ok := ev.Object.(*coordinationv1.Lease); ev.Type != want || !ok || l.Name != "le" {
				t.Errorf("event %s %T, want %s", ev.Type, ev.Object, want)
			}
		case <-ctx.Done():
			t.Fatalf("no %s event", want)
		}
	}

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range lists {
		for _, r := range l.APIResources {
			found = found || (l.GroupVersion == "coordination.k8s.io/v1" && r.Name == "leases")
		}
	}
	if !found {
		t.Errorf("discovery: leases not found in %v", lists)
	}
}
