package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPatch(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	base := env.mustCreate(t, "default", newLease("p1", func(l *coordinationv1.Lease) {
		l.Labels = map[string]string{"a": "1"}
		l.Finalizers = []string{"example.com/f"}
	}))

	patch := func(pt types.PatchType, body string, opts *metav1.PatchOptions) (*coordinationv1.Lease, bool, error) {
		t.Helper()
		out, created, err := env.e.Patch(ctx, sc, "p1", pt, []byte(body), opts)
		if err != nil {
			return nil, created, err
		}
		return out.(*coordinationv1.Lease), created, nil
	}

	l, _, err := patch(types.MergePatchType, `{"spec":{"holderIdentity":"h2","leaseTransitions":3},"metadata":{"labels":{"a":null,"b":"2"}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "h2" || *l.Spec.LeaseTransitions != 3 || l.Labels["a"] != "" || l.Labels["b"] != "2" {
		t.Errorf("merge patch result %+v", l)
	}
	if l.ManagedFields[len(l.ManagedFields)-1].Manager != "leasehold-test" {
		t.Errorf("managedFields %+v", l.ManagedFields)
	}

	l, _, err = patch(types.JSONPatchType, `[{"op":"test","path":"/spec/holderIdentity","value":"h2"},{"op":"replace","path":"/spec/leaseDurationSeconds","value":30}]`, nil)
	if err != nil || *l.Spec.LeaseDurationSeconds != 30 {
		t.Fatalf("json patch: %v %+v", err, l)
	}

	l, _, err = patch(types.StrategicMergePatchType, `{"metadata":{"finalizers":["example.com/g"]},"spec":{"holderIdentity":"h3"}}`, &metav1.PatchOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "h3" || len(l.Finalizers) != 2 {
		t.Errorf("strategic patch: finalizers %v (a set: merged), holder %s", l.Finalizers, *l.Spec.HolderIdentity)
	}

	// resourceVersion inside the patch is a precondition.
	_, _, err = patch(types.MergePatchType, fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"holderIdentity":"x"}}`, base.ResourceVersion), nil)
	wantStatus(t, err, 409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on leases.coordination.k8s.io "p1": the object has been modified; please apply your changes to the latest version and try again`)
	_, _, err = patch(types.MergePatchType, fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"holderIdentity":"x"}}`, l.ResourceVersion), nil)
	if err != nil {
		t.Fatalf("patch with the current RV: %v", err)
	}

	ops := make([]string, maxJSONPatchOperations+1)
	for i := range ops {
		ops[i] = `{"op":"test","path":"/kind","value":"Lease"}`
	}
	cases := []struct {
		name   string
		pt     types.PatchType
		body   string
		opts   *metav1.PatchOptions
		code   int32
		reason metav1.StatusReason
		msg    string
	}{
		{"json test fails", types.JSONPatchType, `[{"op":"test","path":"/spec/holderIdentity","value":"nope"}]`, nil, 422, metav1.StatusReasonInvalid,
			"the server rejected our request due to an error in our request"},
		{"json malformed", types.JSONPatchType, `{"op":1}`, nil, 400, metav1.StatusReasonBadRequest, ""},
		{"json too many", types.JSONPatchType, "[" + strings.Join(ops, ",") + "]", nil, 413, metav1.StatusReasonRequestEntityTooLarge,
			"Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"},
		{"merge bad body", types.MergePatchType, `[1]`, nil, 400, metav1.StatusReasonBadRequest,
			"error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"},
		{"merge undecodable result", types.MergePatchType, `{"spec":{"renewTime":"2024-01-01T00:00:00Z"}}`, nil, 422, metav1.StatusReasonInvalid, ""},
		{"strict unknown field", types.MergePatchType, `{"spec":{"foo":1}}`, &metav1.PatchOptions{FieldValidation: "Strict"}, 422, metav1.StatusReasonInvalid, ""},
		{"force on non-apply", types.MergePatchType, `{}`, &metav1.PatchOptions{Force: ptr(true)}, 422, metav1.StatusReasonInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`},
		{"apply without manager", types.ApplyPatchType, `{}`, nil, 422, metav1.StatusReasonInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"apply wrong type", types.ApplyPatchType, `{"apiVersion":"coordination.k8s.io/v1beta1","kind":"Lease","metadata":{"name":"p1"}}`, &metav1.PatchOptions{FieldManager: "m"}, 400, metav1.StatusReasonBadRequest,
			"invalid object type: coordination.k8s.io/v1beta1, Kind=Lease"},
		{"apply empty type", types.ApplyPatchType, `{}`, &metav1.PatchOptions{FieldManager: "m"}, 400, metav1.StatusReasonBadRequest,
			"invalid object type: /, Kind="},
		{"apply managedFields", types.ApplyPatchType, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"p1","managedFields":[{"manager":"x"}]}}`, &metav1.PatchOptions{FieldManager: "m"}, 400, metav1.StatusReasonBadRequest,
			"metadata.managedFields must be nil"},
		{"name change", types.MergePatchType, `{"metadata":{"name":"other"}}`, nil, 400, metav1.StatusReasonBadRequest,
			"the name of the object (other) does not match the name on the URL (p1)"},
		{"unsupported type", types.PatchType("text/plain"), `{}`, nil, 415, metav1.StatusReasonUnsupportedMediaType, "415: Unsupported Media Type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := patch(c.pt, c.body, c.opts)
			st := wantStatus(t, err, c.code, c.reason, c.msg)
			if c.name == "json test fails" && (st.Details == nil || st.Details.Kind != "" || st.Details.Name != "") {
				t.Errorf("details %+v, want {}", st.Details)
			}
		})
	}

	// Missing object: 404 except for apply, which creates.
	for _, pt := range []types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType} {
		_, _, err := env.e.Patch(ctx, sc, "missing", pt, []byte(`{}`), nil)
		if pt == types.JSONPatchType {
			_, _, err = env.e.Patch(ctx, sc, "missing", pt, []byte(`[]`), nil)
		}
		wantStatus(t, err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "missing" not found`)
	}
}

func TestPatchWarnings(t *testing.T) {
	env := newTestEnv(t)
	env.mustCreate(t, "default", newLease("w"))
	var w Warnings
	ctx := WithWarnings(context.Background(), &w)
	if _, _, err := env.e.Patch(ctx, env.leases("default"), "w", types.MergePatchType, []byte(`{"spec":{"foo":1}}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := w.List(); len(got) != 1 || got[0] != `unknown field "spec.foo"` {
		t.Errorf("warnings %q", got)
	}
}

func TestServerSideApply(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	apply := func(manager, body string, force bool) (*coordinationv1.Lease, bool, error) {
		t.Helper()
		opts := &metav1.PatchOptions{FieldManager: manager}
		if force {
			opts.Force = ptr(true)
		}
		out, created, err := env.e.Patch(ctx, sc, "ssa", types.ApplyPatchType, []byte(body), opts)
		if err != nil {
			return nil, created, err
		}
		return out.(*coordinationv1.Lease), created, nil
	}
	l, created, err := apply("m1", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: ssa\nspec:\n  holderIdentity: a\n  leaseDurationSeconds: 10\n", false)
	if err != nil || !created {
		t.Fatalf("apply create: %v created=%v", err, created)
	}
	if len(l.ManagedFields) != 1 || l.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply || l.ManagedFields[0].Manager != "m1" {
		t.Fatalf("managedFields %+v", l.ManagedFields)
	}
	_, _, err = apply("m2", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"ssa"},"spec":{"holderIdentity":"b"}}`, false)
	st := wantStatus(t, err, 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "m1": .spec.holderIdentity`)
	if len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict {
		t.Errorf("causes %+v", st.Details.Causes)
	}
	_, _, err = apply("m2", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"ssa"},"spec":{"holderIdentity":"b","leaseDurationSeconds":11}}`, false)
	wantStatus(t, err, 409, metav1.StatusReasonConflict, "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .spec.holderIdentity\n- .spec.leaseDurationSeconds")
	l, created, err = apply("m2", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"ssa"},"spec":{"holderIdentity":"b"}}`, true)
	if err != nil || created || *l.Spec.HolderIdentity != "b" {
		t.Fatalf("forced apply: %v %v %+v", err, created, l)
	}
	// m1 drops leaseDurationSeconds from its config: nobody else owns it, so it goes.
	l, _, err = apply("m1", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"ssa"}}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.LeaseDurationSeconds != nil || l.Spec.HolderIdentity == nil {
		t.Errorf("after m1 gave up its fields: %+v", l.Spec)
	}
	// A conflict with an Update manager names its version.
	lease := env.mustGet(t, "default", "ssa")
	lease.Spec.LeaseTransitions = ptr[int32](1)
	if _, _, err := env.e.Update(ctx, sc, "ssa", lease, &metav1.UpdateOptions{FieldManager: "upd"}); err != nil {
		t.Fatal(err)
	}
	_, _, err = apply("m1", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"ssa"},"spec":{"leaseTransitions":2}}`, false)
	wantStatus(t, err, 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "upd" using coordination.k8s.io/v1: .spec.leaseTransitions`)
}

// TestJSONPatchCopyBomb: copy operations that double the document are
// refused once they would add 3 MiB, as kube-apiserver refuses them, quickly
// and without an answer that echoes a giant object.
func TestJSONPatchCopyBomb(t *testing.T) {
	env := newTestEnv(t)
	env.mustCreate(t, "default", newLease("bomb", func(l *coordinationv1.Lease) {
		l.Annotations = map[string]string{"a": strings.Repeat("x", 100)}
	}))
	var ops []string
	for i := range 26 {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/metadata/annotations","path":"/metadata/annotations/c%d"}`, i))
	}
	_, _, err := env.e.Patch(context.Background(), env.leases("default"), "bomb", types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), nil)
	// kube-apiserver's answer: a generic 422 (the limit's own message is
	// not passed on). Without the limit these 26 copies would need 6 GB.
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request")
	// A copy within the limit applies.
	if _, _, err := env.e.Patch(context.Background(), env.leases("default"), "bomb", types.JSONPatchType,
		[]byte(`[{"op":"copy","from":"/metadata/annotations/a","path":"/metadata/annotations/b"}]`), nil); err != nil {
		t.Errorf("a small copy: %.300v", err)
	}
}
