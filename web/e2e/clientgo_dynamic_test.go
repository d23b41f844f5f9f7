package e2e

import (
	"context"
	"regexp"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

var leasesGVR = schema.GroupVersionResource{Group: coordGroup, Version: "v1", Resource: "leases"}

// microRE is the MicroTime wire format: exactly six fractional digits, UTC.
var microRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// TestE2EClientGoDynamic uses the dynamic client (unstructured JSON, as
// kubectl does): CRUD, the MicroTime wire format and its strict parsing,
// and server-side apply with a field-manager conflict.
func TestE2EClientGoDynamic(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	dyn, err := dynamic.NewForConfig(restConfig(t, ts, wireJSON))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leases := dyn.Resource(leasesGVR).Namespace("default")

	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "coordination.k8s.io/v1",
		"kind":       "Lease",
		"metadata":   map[string]any{"name": "dyn", "labels": map[string]any{"a": "b"}},
		"spec": map[string]any{
			"holderIdentity":       "h1",
			"leaseDurationSeconds": int64(15),
			"acquireTime":          "2024-01-01T00:00:00.123456Z",
			"renewTime":            "2024-01-01T02:00:01.000000+02:00", // offsets normalise to UTC
			"leaseTransitions":     int64(0),
		},
	}}
	created, err := leases.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.GetKind() != "Lease" || created.GetAPIVersion() != "coordination.k8s.io/v1" {
		t.Errorf("created kind/apiVersion = %q/%q", created.GetKind(), created.GetAPIVersion())
	}
	spec, _, _ := unstructured.NestedMap(created.Object, "spec")
	if spec["acquireTime"] != "2024-01-01T00:00:00.123456Z" || spec["renewTime"] != "2024-01-01T00:00:01.000000Z" {
		t.Errorf("times = %v / %v, want 2024-01-01T00:00:00.123456Z / 2024-01-01T00:00:01.000000Z", spec["acquireTime"], spec["renewTime"])
	}
	if _, has := created.Object["status"]; has {
		t.Errorf("lease has a status field: %v", created.Object["status"])
	}

	// MicroTime input needs exactly six fractional digits: 400.
	bad := obj.DeepCopy()
	bad.SetName("badtime")
	_ = unstructured.SetNestedField(bad.Object, "2024-01-01T00:00:00Z", "spec", "renewTime")
	_, err = leases.Create(ctx, bad, metav1.CreateOptions{})
	wantStatus(t, "create with seconds-only renewTime", err, 400, metav1.StatusReasonBadRequest,
		`Lease in version "v1" cannot be handled as a Lease: parsing time "2024-01-01T00:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"`)

	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if list.GetKind() != "LeaseList" || len(list.Items) != 1 || list.Items[0].GetName() != "dyn" || list.GetResourceVersion() == "" {
		t.Errorf("list kind=%q rv=%q items=%d", list.GetKind(), list.GetResourceVersion(), len(list.Items))
	}
	for _, it := range list.Items {
		if ts, _, _ := unstructured.NestedString(it.Object, "spec", "renewTime"); !microRE.MatchString(ts) {
			t.Errorf("listed renewTime %q is not a MicroTime", ts)
		}
	}

	// Server-side apply: mgr-a creates and owns the holder; mgr-b conflicts
	// until it forces.
	applied := func(manager, holder string, force bool) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "coordination.k8s.io/v1",
			"kind":       "Lease",
			"metadata":   map[string]any{"name": "ssa"},
			"spec":       map[string]any{"holderIdentity": holder},
		}}
		return leases.Apply(ctx, "ssa", u, metav1.ApplyOptions{FieldManager: manager, Force: force})
	}
	a, err := applied("mgr-a", "a", false)
	if err != nil {
		t.Fatalf("apply by mgr-a (creates): %v", err)
	}
	if ops := managers(a); !slices.Equal(ops, []string{"mgr-a/Apply"}) {
		t.Errorf("managedFields after first apply = %v, want [mgr-a/Apply]", ops)
	}
	_, err = applied("mgr-b", "b", false)
	if !apierrors.IsConflict(err) {
		t.Errorf("conflicting apply: IsConflict false for %v", err)
	}
	st := wantStatus(t, "conflicting apply", err, 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "mgr-a": .spec.holderIdentity`)
	wantCauses(t, "conflicting apply", st, metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Field: ".spec.holderIdentity", Message: `conflict with "mgr-a"`})
	b, err := applied("mgr-b", "b", true)
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if h, _, _ := unstructured.NestedString(b.Object, "spec", "holderIdentity"); h != "b" {
		t.Errorf("holder after forced apply = %q, want b", h)
	}
	if ops := managers(b); !slices.Equal(ops, []string{"mgr-b/Apply"}) {
		t.Errorf("managedFields after forced apply = %v, want [mgr-b/Apply] (mgr-a lost its only field)", ops)
	}

	if err := leases.Delete(ctx, "dyn", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = leases.Get(ctx, "dyn", metav1.GetOptions{})
	wantStatus(t, "get after delete", err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "dyn" not found`)
}

// managers lists managedFields as manager/operation.
func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, m := range u.GetManagedFields() {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	return out
}

const v1beta1Deprecation = `299|-|coordination.k8s.io/v1beta1 LeaseCandidate is deprecated in v1.36+, unavailable in v1.39+`

// TestE2EClientGoLeaseCandidate runs v1beta1 LeaseCandidate CRUD and checks
// that every response carries the deprecation Warning (and v1 Lease
// responses none).
func TestE2EClientGoLeaseCandidate(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	cfg := restConfig(t, ts, wireProtobuf)
	warnings := &warningLog{}
	cfg.WarningHandler = warnings
	cs := clientset(t, cfg)
	ctx := context.Background()
	cands := cs.CoordinationV1beta1().LeaseCandidates("default")
	wantWarned := func(what string) {
		t.Helper()
		if got := warnings.take(); !slices.Equal(got, []string{v1beta1Deprecation}) {
			t.Errorf("%s: warnings %q, want [%q]", what, got, v1beta1Deprecation)
		}
	}

	// LeaseCandidate names follow ConfigMap-key rules: uppercase and _ pass.
	in := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: "Cand_1.x"},
		Spec: coordinationv1beta1.LeaseCandidateSpec{
			LeaseName:        "my-lease",
			RenewTime:        nowMicro(),
			BinaryVersion:    "1.37.0",
			EmulationVersion: "1.37.0",
			Strategy:         coordinationv1.OldestEmulationVersion,
		},
	}
	created, err := cands.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	wantWarned("create")
	if created.Spec.Strategy != coordinationv1.OldestEmulationVersion || created.Spec.LeaseName != "my-lease" || created.Spec.PingTime != nil {
		t.Errorf("created spec = %+v", created.Spec)
	}

	got, err := cands.Get(ctx, "Cand_1.x", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	wantWarned("get")
	got.Spec.PingTime = nowMicro()
	updated, err := cands.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	wantWarned("update")
	if updated.Spec.PingTime == nil || !rvLess(t, got.ResourceVersion, updated.ResourceVersion) {
		t.Errorf("update: pingTime %v rv %s -> %s", updated.Spec.PingTime, got.ResourceVersion, updated.ResourceVersion)
	}

	// leaseName is immutable.
	updated.Spec.LeaseName = "other"
	_, err = cands.Update(ctx, updated, metav1.UpdateOptions{})
	warnings.take()
	st := wantStatus(t, "change leaseName", err, 422, metav1.StatusReasonInvalid,
		`LeaseCandidate.coordination.k8s.io "Cand_1.x" is invalid: spec.leaseName: Invalid value: "other": field is immutable`)
	wantDetails(t, "change leaseName", st, "Cand_1.x", coordGroup, "LeaseCandidate")

	// binaryVersion is required.
	_, err = cands.Create(ctx, &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: "nobin"},
		Spec:       coordinationv1beta1.LeaseCandidateSpec{LeaseName: "l", Strategy: "foo.com/bar"},
	}, metav1.CreateOptions{})
	warnings.take()
	if !apierrors.IsInvalid(err) {
		t.Errorf("create without binaryVersion: IsInvalid false for %v", err)
	} else if st := apiStatus(t, err); st.Details == nil || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Field != "spec.binaryVersion" || st.Details.Causes[0].Type != metav1.CauseTypeFieldValueRequired {
		t.Errorf("create without binaryVersion: causes %+v, want one FieldValueRequired on spec.binaryVersion", st.Details)
	}

	list, err := cands.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	wantWarned("list")
	if len(list.Items) != 1 || list.Items[0].Name != "Cand_1.x" {
		t.Errorf("list = %+v", list.Items)
	}

	// The same object read through v1alpha2 carries that version's warning.
	alpha, err := cs.CoordinationV1alpha2().LeaseCandidates("default").Get(ctx, "Cand_1.x", metav1.GetOptions{})
	if err != nil {
		t.Errorf("get via v1alpha2: %v", err)
	} else if alpha.Spec.LeaseName != "my-lease" || alpha.UID != created.UID {
		t.Errorf("v1alpha2 view = %+v", alpha)
	}
	if got := warnings.take(); !slices.Equal(got, []string{`299|-|coordination.k8s.io/v1alpha2 LeaseCandidate is deprecated in v1.35+, unavailable in v1.38+`}) {
		t.Errorf("v1alpha2 warnings = %q", got)
	}

	if err := cands.Delete(ctx, "Cand_1.x", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantWarned("delete")
	_, err = cands.Get(ctx, "Cand_1.x", metav1.GetOptions{})
	warnings.take()
	wantStatus(t, "get after delete", err, 404, metav1.StatusReasonNotFound, `leasecandidates.coordination.k8s.io "Cand_1.x" not found`)

	// v1 Leases are not deprecated: no warning.
	if _, err := cs.CoordinationV1().Leases("default").Patch(ctx, "absent", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("patch absent lease: %v, want NotFound", err)
	}
	if _, err := cs.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list leases: %v", err)
	}
	if got := warnings.take(); len(got) != 0 {
		t.Errorf("v1 Lease requests produced warnings %q", got)
	}
}
