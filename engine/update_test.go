package engine

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestUpdate(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")

	// Create on update: 201, any resourceVersion in the body ignored.
	out, created, err := env.e.Update(ctx, sc, "l1", newLease("l1", func(l *coordinationv1.Lease) { l.ResourceVersion = "999" }), nil)
	if err != nil || !created {
		t.Fatalf("create on update: %v created=%v", err, created)
	}
	cur := out.(*coordinationv1.Lease)

	// Renewal: PUT of the whole object with a new renewTime.
	renew := metav1.NewMicroTime(env.clock.Now().Add(time.Second))
	cur.Spec.RenewTime = &renew
	out, created, err = env.e.Update(ctx, sc, "l1", cur, nil)
	if err != nil || created {
		t.Fatalf("update: %v created=%v", err, created)
	}
	upd := out.(*coordinationv1.Lease)
	if upd.ResourceVersion == cur.ResourceVersion {
		t.Fatalf("resourceVersion not bumped")
	}

	// No-op update: same RV, no event.
	w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: upd.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	env.clock.Add(time.Minute)
	same, _, err := env.e.Update(ctx, sc, "l1", upd.DeepCopy(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if same.(*coordinationv1.Lease).ResourceVersion != upd.ResourceVersion {
		t.Errorf("no-op update changed RV %s -> %s", upd.ResourceVersion, same.(*coordinationv1.Lease).ResourceVersion)
	}
	// An update by another manager that changes nothing is also a no-op.
	if _, _, err := env.e.Update(ctx, sc, "l1", upd.DeepCopy(), &metav1.UpdateOptions{FieldManager: "other"}); err != nil {
		t.Fatal(err)
	}
	if got := env.mustGet(t, "default", "l1"); got.ResourceVersion != upd.ResourceVersion {
		t.Errorf("manager-only change wrote a new RV")
	}
	upd2 := upd.DeepCopy()
	upd2.Labels = map[string]string{"x": "y"}
	if _, _, err := env.e.Update(ctx, sc, "l1", upd2, nil); err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	if ev.Type != watch.Modified || ev.Object.(*coordinationv1.Lease).Labels["x"] != "y" {
		t.Fatalf("first event after the no-op is %s %v, want the label change", ev.Type, ev.Object)
	}

	latest := env.mustGet(t, "default", "l1")
	cases := []struct {
		name   string
		target string
		mut    func(*coordinationv1.Lease)
		opts   *metav1.UpdateOptions
		code   int32
		reason metav1.StatusReason
		msg    string
		kind   string
	}{
		{"missing RV", "l1", func(l *coordinationv1.Lease) { l.ResourceVersion = "" }, nil, 422, metav1.StatusReasonInvalid,
			`leases.coordination.k8s.io "l1" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`, "leases"},
		{"stale RV", "l1", func(l *coordinationv1.Lease) { l.ResourceVersion = upd.ResourceVersion }, nil, 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on leases.coordination.k8s.io "l1": the object has been modified; please apply your changes to the latest version and try again`, "leases"},
		{"uid precondition", "l1", func(l *coordinationv1.Lease) { l.UID = "zzz" }, nil, 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on leases.coordination.k8s.io "l1": StorageError: invalid object, Code: 4, Key: /registry/leases/default/l1, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: zzz, UID in object meta: ` + string(latest.UID), "leases"},
		{"uid on missing", "l9", func(l *coordinationv1.Lease) { l.Name = "l9"; l.UID = "zzz" }, nil, 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on leases.coordination.k8s.io "l9": StorageError: invalid object, Code: 4, Key: /registry/leases/default/l9, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: zzz, UID in object meta: `, "leases"},
		{"name mismatch", "l1", func(l *coordinationv1.Lease) { l.Name = "zz" }, nil, 400, metav1.StatusReasonBadRequest,
			"the name of the object (zz) does not match the name on the URL (l1)", ""},
		{"namespace mismatch", "l1", func(l *coordinationv1.Lease) { l.Namespace = "other" }, nil, 400, metav1.StatusReasonBadRequest,
			"the namespace of the object (other) does not match the namespace on the request (default)", ""},
		{"bad RV syntax", "l1", func(l *coordinationv1.Lease) { l.ResourceVersion = "abc" }, nil, 500, "",
			`strconv.ParseUint: parsing "abc": invalid syntax`, ""},
		{"bad RV syntax on missing", "l8", func(l *coordinationv1.Lease) { l.Name = "l8"; l.UID = ""; l.ResourceVersion = "-1" }, nil, 500, "",
			`strconv.ParseUint: parsing "-1": invalid syntax`, ""},
		{"invalid spec", "l1", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr[int32](0) }, nil, 422, metav1.StatusReasonInvalid,
			`Lease.coordination.k8s.io "l1" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`, "Lease"},
		{"invalid label once", "l1", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"a": "-bad-"} }, nil, 422, metav1.StatusReasonInvalid, "", "Lease"},
		{"options", "l1", func(*coordinationv1.Lease) {}, &metav1.UpdateOptions{DryRun: []string{"x"}}, 422, metav1.StatusReasonInvalid,
			`UpdateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["x"]: supported values: "All"`, "UpdateOptions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := latest.DeepCopy()
			c.mut(l)
			_, _, err := env.e.Update(ctx, sc, c.target, l, c.opts)
			st := wantStatus(t, err, c.code, c.reason, c.msg)
			if c.kind != "" && (st.Details == nil || st.Details.Kind != c.kind) {
				t.Errorf("details %+v, want kind %q", st.Details, c.kind)
			}
			if c.name == "invalid label once" && len(st.Details.Causes) != 1 {
				t.Errorf("causes %+v, want the label error once (1.37)", st.Details.Causes)
			}
		})
	}

	// Immutable system fields come from the stored object.
	l := latest.DeepCopy()
	l.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
	l.Generation = 99
	l.UID = ""
	out, _, err = env.e.Update(ctx, sc, "l1", l, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := out.(*coordinationv1.Lease)
	if !o.CreationTimestamp.Equal(&latest.CreationTimestamp) || o.Generation != latest.Generation || o.UID != latest.UID {
		t.Errorf("system fields not preserved: %+v", o.ObjectMeta)
	}

	// dryRun: validated result with the old RV, nothing stored.
	l = env.mustGet(t, "default", "l1")
	l.Spec.HolderIdentity = ptr("dry")
	out, _, err = env.e.Update(ctx, sc, "l1", l, &metav1.UpdateOptions{DryRun: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if o := out.(*coordinationv1.Lease); o.ResourceVersion != l.ResourceVersion || *o.Spec.HolderIdentity != "dry" {
		t.Errorf("dry run update %+v", o)
	}
	if got := env.mustGet(t, "default", "l1"); *got.Spec.HolderIdentity == "dry" {
		t.Errorf("dry run stored the update")
	}
}

// A client that sends managedFields gets them honoured; [{}] resets them.
func TestUpdateManagedFields(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(t, "default", newLease("m"))
	l := env.mustGet(t, "default", "m")
	l.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	l.Spec.HolderIdentity = ptr("h9")
	out, _, err := env.e.Update(ctx, sc, "m", l, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mf := out.(*coordinationv1.Lease).ManagedFields; len(mf) != 0 {
		t.Errorf("reset left %+v", mf)
	}
	// Up to 10 update managers are kept; older ones merge into ancient-changes.
	for i := 0; i < 12; i++ {
		l := env.mustGet(t, "default", "m")
		l.Labels = map[string]string{"i": string(rune('a' + i))}
		l.ManagedFields = nil
		if i == 0 {
			l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "seed", Operation: "Update", APIVersion: "coordination.k8s.io/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:holderIdentity":{}}}`)}}}
		}
		if _, _, err := env.e.Update(ctx, sc, "m", l, &metav1.UpdateOptions{FieldManager: "mgr-" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	mf := env.mustGet(t, "default", "m").ManagedFields
	if len(mf) > 11 {
		t.Errorf("%d managers, want at most 10 (+ancient-changes)", len(mf))
	}
}
