package e2e

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

const coordGroup = "coordination.k8s.io"

// TestE2EClientGoTyped drives the typed Lease client through CRUD and the
// error catalogue, in protobuf (client-go's default) and in JSON: errors
// must decode as a Status in both.
func TestE2EClientGoTyped(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{wireProtobuf, wireJSON} {
		t.Run(wireName(ct), func(t *testing.T) {
			ts := startServer(t)
			cs := clientset(t, restConfig(t, ts, ct))
			t.Run("create-get-update", func(t *testing.T) { typedCreateGetUpdate(t, cs) })
			t.Run("errors", func(t *testing.T) { typedErrors(t, cs) })
			t.Run("patch-list-delete", func(t *testing.T) { typedPatchListDelete(t, cs) })
		})
	}
}

// nowMicro is now truncated to the wire's microsecond precision.
func nowMicro() *metav1.MicroTime {
	m := metav1.NewMicroTime(time.Now().UTC().Truncate(time.Microsecond))
	return &m
}

func newLease(name string, labels map[string]string, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       new(holder),
			LeaseDurationSeconds: new(int32(15)),
			AcquireTime:          nowMicro(),
			RenewTime:            nowMicro(),
			LeaseTransitions:     new(int32(0)),
		},
	}
}

func typedCreateGetUpdate(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	leases := cs.CoordinationV1().Leases("default")

	// kube-apiserver 1.37 drops strategy and preferredHolder while the
	// CoordinatedLeaderElection gate is off; leasehold runs with coordinated
	// election on (README "Differences"), so a create keeps both. Only the
	// create response is checked: the election controller then clears a
	// preferredHolder that names no candidate, by design.
	coord := newLease("coord", nil, "h1")
	coord.Spec.Strategy = new(coordinationv1.OldestEmulationVersion)
	coord.Spec.PreferredHolder = new("h2")
	gotCoord, err := leases.Create(ctx, coord, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create with strategy: %v", err)
	}
	wantSpec(t, "created with strategy", coord.Spec, gotCoord.Spec)

	in := newLease("crud", map[string]string{"app": "e2e"}, "h1")
	created, err := leases.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	wantSpec(t, "created", in.Spec, created.Spec)
	if created.Generation != 0 {
		t.Errorf("generation = %d, want 0 (leases have none)", created.Generation)
	}
	if created.Namespace != "default" || created.UID == "" || created.CreationTimestamp.IsZero() {
		t.Errorf("created metadata = %+v", created.ObjectMeta)
	}
	if len(created.ManagedFields) != 1 {
		t.Fatalf("managedFields = %+v, want one entry", created.ManagedFields)
	}
	mf := created.ManagedFields[0]
	if mf.Manager != "leasehold-e2e" || mf.Operation != metav1.ManagedFieldsOperationUpdate ||
		mf.APIVersion != "coordination.k8s.io/v1" || mf.FieldsType != "FieldsV1" || mf.FieldsV1 == nil {
		t.Errorf("managedFields[0] = %+v, want manager leasehold-e2e (the User-Agent prefix), Update, coordination.k8s.io/v1, FieldsV1", mf)
	}

	got, err := leases.Get(ctx, "crud", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.UID != created.UID {
		t.Errorf("get rv/uid = %s/%s, want %s/%s", got.ResourceVersion, got.UID, created.ResourceVersion, created.UID)
	}
	wantSpec(t, "get", created.Spec, got.Spec)

	// A real change bumps the RV.
	got.Spec.HolderIdentity = new("h2")
	got.Spec.LeaseTransitions = new(int32(1))
	updated, err := leases.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if !rvLess(t, got.ResourceVersion, updated.ResourceVersion) {
		t.Errorf("update RV %s not newer than %s", updated.ResourceVersion, got.ResourceVersion)
	}
	if *updated.Spec.HolderIdentity != "h2" || *updated.Spec.LeaseTransitions != 1 {
		t.Errorf("updated spec = %+v", updated.Spec)
	}

	// An update that changes nothing is a no-op: same RV.
	same, err := leases.Update(ctx, updated.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("no-op update: %v", err)
	}
	if same.ResourceVersion != updated.ResourceVersion {
		t.Errorf("no-op update changed RV %s -> %s", updated.ResourceVersion, same.ResourceVersion)
	}

	// The empty holderIdentity client-go writes on release round-trips as
	// "", distinct from absent.
	same.Spec.HolderIdentity = new("")
	released, err := leases.Update(ctx, same, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("release update: %v", err)
	}
	if released.Spec.HolderIdentity == nil || *released.Spec.HolderIdentity != "" {
		t.Errorf("holderIdentity after release = %v, want pointer to \"\"", released.Spec.HolderIdentity)
	}

	// PUT on a missing lease creates it: 201.
	var code int
	obj, err := cs.CoordinationV1().RESTClient().Put().Namespace("default").Resource("leases").Name("put-create").
		Body(newLease("put-create", nil, "h")).Do(ctx).StatusCode(&code).Get()
	if err != nil {
		t.Fatalf("PUT-create: %v", err)
	}
	if code != 201 {
		t.Errorf("PUT of a missing lease answered %d, want 201", code)
	}
	if l, ok := obj.(*coordinationv1.Lease); !ok || l.Name != "put-create" || l.ResourceVersion == "" {
		t.Errorf("PUT-create returned %T %+v", obj, obj)
	}
}

func typedErrors(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	leases := cs.CoordinationV1().Leases("default")
	created, err := leases.Create(ctx, newLease("err", nil, "h1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	_, err = leases.Create(ctx, newLease("err", nil, "h1"), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: IsAlreadyExists false for %v", err)
	}
	st := wantStatus(t, "second create", err, 409, metav1.StatusReasonAlreadyExists, `leases.coordination.k8s.io "err" already exists`)
	wantDetails(t, "second create", st, "err", coordGroup, "leases")

	_, err = leases.Get(ctx, "nope", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get missing: IsNotFound false for %v", err)
	}
	st = wantStatus(t, "get missing", err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "nope" not found`)
	wantDetails(t, "get missing", st, "nope", coordGroup, "leases")

	// Move the lease on, then write with the stale copy.
	fresh := created.DeepCopy()
	fresh.Spec.HolderIdentity = new("h2")
	if _, err := leases.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	created.Spec.HolderIdentity = new("h3")
	_, err = leases.Update(ctx, created, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("stale update: IsConflict false for %v", err)
	}
	st = wantStatus(t, "stale update", err, 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on leases.coordination.k8s.io "err": the object has been modified; please apply your changes to the latest version and try again`)
	wantDetails(t, "stale update", st, "err", coordGroup, "leases")

	// An update of an existing lease requires a resourceVersion: 422, not 409.
	created.ResourceVersion = ""
	_, err = leases.Update(ctx, created, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("update without RV: IsInvalid false for %v", err)
	}
	st = wantStatus(t, "update without RV", err, 422, metav1.StatusReasonInvalid,
		`leases.coordination.k8s.io "err" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`)
	wantDetails(t, "update without RV", st, "err", coordGroup, "leases")

	// Spec validation: both causes, in field order, in one 422.
	bad := newLease("bad", nil, "h")
	bad.Spec.LeaseDurationSeconds = new(int32(0))
	bad.Spec.LeaseTransitions = new(int32(-1))
	_, err = leases.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("invalid spec: IsInvalid false for %v", err)
	}
	st = wantStatus(t, "invalid spec", err, 422, metav1.StatusReasonInvalid,
		`Lease.coordination.k8s.io "bad" is invalid: [spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0]`)
	wantDetails(t, "invalid spec", st, "bad", coordGroup, "Lease")
	wantCauses(t, "invalid spec", st,
		metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.leaseDurationSeconds", Message: "Invalid value: 0: must be greater than 0"},
		metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.leaseTransitions", Message: "Invalid value: -1: must be greater than or equal to 0"})

	// With coordinated election on, strategy rules apply (upstream's odd
	// double field path spec.strategy.strategy included).
	ph := newLease("ph", nil, "h")
	ph.Spec.PreferredHolder = new("other")
	_, err = leases.Create(ctx, ph, metav1.CreateOptions{})
	st = wantStatus(t, "preferredHolder without strategy", err, 422, metav1.StatusReasonInvalid,
		"Lease.coordination.k8s.io \"ph\" is invalid: spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined")
	wantCauses(t, "preferredHolder without strategy", st, metav1.StatusCause{Type: metav1.CauseTypeForbidden,
		Field: "spec.preferredHolder", Message: "Forbidden: may only be specified if `strategy` is defined"})
	foo := newLease("foo", nil, "h")
	foo.Spec.Strategy = new(coordinationv1.CoordinatedLeaseStrategy("Foo"))
	_, err = leases.Create(ctx, foo, metav1.CreateOptions{})
	wantStatus(t, "unsupported strategy", err, 422, metav1.StatusReasonInvalid,
		`Lease.coordination.k8s.io "foo" is invalid: spec.strategy.strategy: Unsupported value: "Foo": supported values: "OldestEmulationVersion"`)

	_, err = leases.Create(ctx, newLease("Bad_Name", nil, "h"), metav1.CreateOptions{})
	st = wantStatus(t, "invalid name", err, 422, metav1.StatusReasonInvalid,
		`Lease.coordination.k8s.io "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`)
	wantCauses(t, "invalid name", st, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "metadata.name",
		Message: `Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`})

	// Patches of a missing lease are 404 (only apply creates).
	_, err = leases.Patch(ctx, "nope", types.MergePatchType, []byte(`{"spec":{"holderIdentity":"x"}}`), metav1.PatchOptions{})
	wantStatus(t, "merge patch missing", err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "nope" not found`)

	// A failed json-patch test is a 422 with the generic text.
	_, err = leases.Patch(ctx, "err", types.JSONPatchType, []byte(`[{"op":"test","path":"/spec/holderIdentity","value":"wrong"}]`), metav1.PatchOptions{})
	wantStatus(t, "json patch failed test", err, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request")

	// A delete with a wrong UID precondition names the Kind, not the resource.
	cur, err := leases.Get(ctx, "err", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	err = leases.Delete(ctx, "err", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: new(types.UID("nope"))}})
	st = wantStatus(t, "delete precondition", err, 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on Lease.coordination.k8s.io "err": the UID in the precondition (nope) does not match the UID in record (`+string(cur.UID)+`). The object might have been deleted and then recreated`)
	wantDetails(t, "delete precondition", st, "err", coordGroup, "Lease")

	// Only metadata.name and metadata.namespace are field selectors.
	_, err = leases.List(ctx, metav1.ListOptions{FieldSelector: "spec.holderIdentity=h1"})
	wantStatus(t, "bad field selector", err, 400, metav1.StatusReasonBadRequest,
		`"spec.holderIdentity" is not a known field selector: only "metadata.name", "metadata.namespace"`)
}

// wantCauses compares a Status's causes exactly, in order.
func wantCauses(t *testing.T, what string, st metav1.Status, want ...metav1.StatusCause) {
	t.Helper()
	var got []metav1.StatusCause
	if st.Details != nil {
		got = st.Details.Causes
	}
	if len(got) != len(want) {
		t.Errorf("%s: causes = %+v, want %+v", what, got, want)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: cause %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

func typedPatchListDelete(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	leases := cs.CoordinationV1().Leases("kube-system")
	for _, n := range []string{"p1", "p2", "p3"} {
		team := "a"
		if n == "p3" {
			team = "b"
		}
		if _, err := leases.Create(ctx, newLease(n, map[string]string{"team": team}, "h-"+n), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}

	// Merge, strategic and json patches.
	p, err := leases.Patch(ctx, "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}},"spec":{"holderIdentity":"m"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if p.Labels["x"] != "y" || p.Labels["team"] != "a" || *p.Spec.HolderIdentity != "m" {
		t.Errorf("after merge patch labels=%v holder=%q", p.Labels, *p.Spec.HolderIdentity)
	}
	p, err = leases.Patch(ctx, "p1", types.StrategicMergePatchType, []byte(`{"spec":{"leaseDurationSeconds":null,"holderIdentity":"s"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("strategic patch: %v", err)
	}
	if p.Spec.LeaseDurationSeconds != nil || *p.Spec.HolderIdentity != "s" {
		t.Errorf("after strategic patch spec = %+v, want leaseDurationSeconds removed and holder s", p.Spec)
	}
	p, err = leases.Patch(ctx, "p1", types.JSONPatchType, []byte(`[{"op":"test","path":"/spec/holderIdentity","value":"s"},{"op":"replace","path":"/spec/leaseTransitions","value":7}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("json patch: %v", err)
	}
	if *p.Spec.LeaseTransitions != 7 {
		t.Errorf("after json patch leaseTransitions = %d, want 7", *p.Spec.LeaseTransitions)
	}
	// A resourceVersion inside a patch is a precondition.
	_, err = leases.Patch(ctx, "p1", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"},"spec":{"holderIdentity":"z"}}`), metav1.PatchOptions{})
	wantStatus(t, "patch with stale RV", err, 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on leases.coordination.k8s.io "p1": the object has been modified; please apply your changes to the latest version and try again`)

	// Selectors.
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "team=a"})
	if err != nil {
		t.Fatalf("list team=a: %v", err)
	}
	wantNames(t, "label selector team=a", list, "p1", "p2")
	list, err = leases.List(ctx, metav1.ListOptions{LabelSelector: "team notin (a)"})
	if err != nil {
		t.Fatalf("list notin: %v", err)
	}
	wantNames(t, "label selector team notin (a)", list, "p3")
	list, err = leases.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=p2"})
	if err != nil {
		t.Fatalf("list field selector: %v", err)
	}
	wantNames(t, "field selector metadata.name=p2", list, "p2")

	// Pagination: continue token and remainingItemCount, one snapshot RV.
	page1, err := leases.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatalf("list page 1: %v", err)
	}
	wantNames(t, "page 1", page1, "p1", "p2")
	if page1.Continue == "" || page1.RemainingItemCount == nil || *page1.RemainingItemCount != 1 {
		t.Errorf("page 1 continue=%q remainingItemCount=%v, want a token and 1", page1.Continue, page1.RemainingItemCount)
	}
	page2, err := leases.List(ctx, metav1.ListOptions{Limit: 2, Continue: page1.Continue})
	if err != nil {
		t.Fatalf("list page 2: %v", err)
	}
	wantNames(t, "page 2", page2, "p3")
	if page2.Continue != "" || page2.ResourceVersion != page1.ResourceVersion {
		t.Errorf("page 2 continue=%q rv=%s, want no token and the first page's rv %s", page2.Continue, page2.ResourceVersion, page1.ResourceVersion)
	}

	// DELETECOLLECTION answers the deleted items as a LeaseList.
	var code int
	obj, err := cs.CoordinationV1().RESTClient().Delete().Namespace("kube-system").Resource("leases").
		VersionedParams(&metav1.ListOptions{LabelSelector: "team=a"}, scheme.ParameterCodec).
		Body(&metav1.DeleteOptions{}).Do(ctx).StatusCode(&code).Get()
	if err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	deleted, ok := obj.(*coordinationv1.LeaseList)
	if !ok {
		t.Fatalf("deletecollection returned %T, want *LeaseList", obj)
	}
	if code != 200 {
		t.Errorf("deletecollection code %d, want 200", code)
	}
	wantNames(t, "deletecollection result", deleted, "p1", "p2")

	// DELETE answers a Success Status naming the resource and the uid.
	p3, err := leases.Get(ctx, "p3", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get p3: %v", err)
	}
	obj, err = cs.CoordinationV1().RESTClient().Delete().Namespace("kube-system").Resource("leases").Name("p3").
		Body(&metav1.DeleteOptions{}).Do(ctx).StatusCode(&code).Get()
	if err != nil {
		t.Fatalf("delete p3: %v", err)
	}
	st, ok := obj.(*metav1.Status)
	if !ok {
		t.Fatalf("delete returned %T, want *metav1.Status", obj)
	}
	if code != 200 || st.Status != metav1.StatusSuccess || st.Details == nil ||
		st.Details.Name != "p3" || st.Details.Group != coordGroup || st.Details.Kind != "leases" || st.Details.UID != p3.UID {
		t.Errorf("delete answered %d %+v details %+v, want 200 Success {p3 %s leases %s}", code, st, st.Details, coordGroup, p3.UID)
	}
	list, err = leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("final list: %v", err)
	}
	wantNames(t, "after deletes", list)
	err = leases.Delete(ctx, "p3", metav1.DeleteOptions{})
	wantStatus(t, "delete missing", err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "p3" not found`)
}
