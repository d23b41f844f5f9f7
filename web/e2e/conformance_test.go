package e2e

import (
	"context"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
)

// TestE2EConformanceLease replays the upstream conformance test
// "[sig-node] Lease lease API should be available" (k8s.io/kubernetes
// test/e2e/common/node/lease.go, unchanged from v1.17 to v1.37) step by
// step, once with the e2e framework's default protobuf clientset and once
// forced to JSON, because the two codecs take different server paths.
func TestE2EConformanceLease(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{wireProtobuf, wireJSON} {
		t.Run(wireName(ct), func(t *testing.T) {
			ts := startServer(t)
			conformanceLease(t, clientset(t, restConfig(t, ts, ct)))
		})
	}
}

// epoch is time.Time{}: the conformance test uses year-0001 MicroTimes.
var epoch = time.Time{}

func conformanceSpec(holder string, duration int32, acquire, renew time.Duration, transitions int32) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       new(holder),
		LeaseDurationSeconds: new(duration),
		AcquireTime:          &metav1.MicroTime{Time: epoch.Add(acquire)},
		RenewTime:            &metav1.MicroTime{Time: epoch.Add(renew)},
		LeaseTransitions:     new(transitions),
	}
}

func conformanceLease(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	// The e2e framework runs in a fresh namespace; a node lease in another
	// namespace stands in for the kubelets' leases the all-namespaces list
	// of a real cluster returns.
	const ns = "default"
	nodeLease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
		Spec:       conformanceSpec("node-1", 40, 0, time.Second, 0),
	}
	if _, err := cs.CoordinationV1().Leases("kube-node-lease").Create(ctx, nodeLease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node lease: %v", err)
	}

	leaseClient := cs.CoordinationV1().Leases(ns)
	name := "lease"
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       conformanceSpec("holder", 30, 2*time.Second, 5*time.Second, 0),
	}

	// Step 1: create; the RV must be a valid one (HaveValidResourceVersion).
	createdLease, err := leaseClient.Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Lease failed: %v", err)
	}
	checkValidResourceVersion(t, createdLease.ResourceVersion)
	if createdLease.Namespace != ns || createdLease.Name != name || createdLease.UID == "" || createdLease.CreationTimestamp.IsZero() {
		t.Errorf("created lease metadata = %+v, want namespace %q, name %q, a uid and a creationTimestamp", createdLease.ObjectMeta, ns, name)
	}

	// Step 2: get returns the spec as sent, year-0001 times included.
	readLease, err := leaseClient.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("couldn't read Lease: %v", err)
	}
	wantSpec(t, "after create", lease.Spec, readLease.Spec)

	// Step 3: update (PUT) the object create returned, with a new spec.
	createdLease.Spec = conformanceSpec("holder2", 30, 20*time.Second, 50*time.Second, 1)
	updated, err := leaseClient.Update(ctx, createdLease, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("couldn't update Lease: %v", err)
	}
	if !rvLess(t, createdLease.ResourceVersion, updated.ResourceVersion) {
		t.Errorf("update RV %s is not newer than create RV %s", updated.ResourceVersion, createdLease.ResourceVersion)
	}
	readLease, err = leaseClient.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("couldn't read Lease: %v", err)
	}
	wantSpec(t, "after update", createdLease.Spec, readLease.Spec)

	// Step 4: strategic merge patch computed as the e2e test does.
	patchedLease := readLease.DeepCopy()
	patchedLease.Spec = conformanceSpec("holder3", 60, 50*time.Second, 70*time.Second, 2)
	patchBytes := twoWayMergePatch(t, readLease, patchedLease)
	if _, err := leaseClient.Patch(ctx, name, types.StrategicMergePatchType, patchBytes, metav1.PatchOptions{}); err != nil {
		t.Fatalf("failed to patch lease with %s: %v", patchBytes, err)
	}
	readLease, err = leaseClient.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("couldn't read Lease: %v", err)
	}
	wantSpec(t, "after patch", patchedLease.Spec, readLease.Spec)
	if !rvLess(t, createdLease.ResourceVersion, readLease.ResourceVersion) {
		t.Errorf("CompareResourceVersion(created %s, read %s) != -1", createdLease.ResourceVersion, readLease.ResourceVersion)
	}
	if readLease.UID != createdLease.UID || !readLease.CreationTimestamp.Equal(&createdLease.CreationTimestamp) {
		t.Errorf("uid/creationTimestamp changed across updates: %s %v -> %s %v",
			createdLease.UID, createdLease.CreationTimestamp, readLease.UID, readLease.CreationTimestamp)
	}

	// Step 5: a second lease, labelled for deletecollection.
	name2 := "lease2"
	lease2 := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name2, Labels: map[string]string{"deletecollection": "true"}},
		Spec:       conformanceSpec("holder", 30, 2*time.Second, 5*time.Second, 0),
	}
	if _, err := leaseClient.Create(ctx, lease2, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Lease failed: %v", err)
	}
	leases, err := leaseClient.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("couldn't list Leases: %v", err)
	}
	wantNames(t, "namespace list", leases, "lease", "lease2")
	checkValidResourceVersion(t, leases.ResourceVersion)

	// Step 6: deletecollection by label selector.
	selector := labels.Set(map[string]string{"deletecollection": "true"}).AsSelector()
	if err := leaseClient.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector.String()}); err != nil {
		t.Fatalf("couldn't delete collection: %v", err)
	}
	leases, err = leaseClient.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("couldn't list Leases: %v", err)
	}
	wantNames(t, "namespace list after deletecollection", leases, "lease")

	// Step 7: delete, then get is NotFound.
	if err := leaseClient.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting Lease failed: %v", err)
	}
	_, err = leaseClient.Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("expected IsNotFound error, got %#v", err)
	}

	// Step 8: list across all namespaces.
	leases, err = cs.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("couldn't list Leases from all namespaces: %v", err)
	}
	wantNames(t, "all-namespaces list", leases, "node-1")
	if len(leases.Items) == 1 && leases.Items[0].Namespace != "kube-node-lease" {
		t.Errorf("all-namespaces list item namespace = %q, want kube-node-lease", leases.Items[0].Namespace)
	}
}

// checkValidResourceVersion is the e2e framework's HaveValidResourceVersion:
// a base-10 integer >= 0 that fits in 128 bits.
func checkValidResourceVersion(t *testing.T, rv string) {
	t.Helper()
	n, ok := new(big.Int).SetString(rv, 10)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		t.Errorf("resourceVersion %q is not a non-negative base-10 integer of at most 128 bits", rv)
	}
}

// wantSpec compares specs as the e2e test does (semantic equality: times
// equal at the wire's microsecond precision).
func wantSpec(t *testing.T, when string, want, got coordinationv1.LeaseSpec) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(want, got) {
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		t.Errorf("%s: Leases don't match\nwant %s\ngot  %s", when, w, g)
	}
}

func wantNames(t *testing.T, what string, list *coordinationv1.LeaseList, names ...string) {
	t.Helper()
	var got []string
	for _, l := range list.Items {
		got = append(got, l.Name)
	}
	if len(got) != len(names) {
		t.Errorf("%s: got items %q, want %q", what, got, names)
		return
	}
	for i := range names {
		if got[i] != names[i] {
			t.Errorf("%s: got items %q, want %q (in key order)", what, got, names)
			return
		}
	}
}

// twoWayMergePatch is the e2e test's getPatchBytes.
func twoWayMergePatch(t *testing.T, oldLease, newLease *coordinationv1.Lease) []byte {
	t.Helper()
	oldData, err := json.Marshal(oldLease)
	if err != nil {
		t.Fatal(err)
	}
	newData, err := json.Marshal(newLease)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, coordinationv1.Lease{})
	if err != nil {
		t.Fatalf("CreateTwoWayMergePatch: %v", err)
	}
	return patch
}
