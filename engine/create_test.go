package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCreate(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	l := newLease("l1", func(l *coordinationv1.Lease) {
		l.Labels = map[string]string{"a": "b"}
		l.Generation = 7
		l.UID = "client-uid"
		l.Spec.Strategy = ptr(coordinationv1.OldestEmulationVersion)
		l.Spec.PreferredHolder = ptr("p")
	})
	out := env.mustCreate(t, "default", l)
	if out.UID == "" || out.UID == "client-uid" {
		t.Errorf("uid not regenerated: %q", out.UID)
	}
	if !out.CreationTimestamp.Time.Equal(env.clock.Now()) {
		t.Errorf("creationTimestamp %v, want %v", out.CreationTimestamp, env.clock.Now())
	}
	if out.Generation != 7 {
		t.Errorf("generation %d, want the client's 7", out.Generation)
	}
	if out.Spec.Strategy == nil || out.Spec.PreferredHolder == nil {
		t.Errorf("strategy/preferredHolder dropped, but CoordinatedLeaderElection is served")
	}
	if out.Kind != "Lease" || out.APIVersion != "coordination.k8s.io/v1" {
		t.Errorf("TypeMeta %+v", out.TypeMeta)
	}
	if len(out.ManagedFields) != 1 || out.ManagedFields[0].Manager != "leasehold-test" || out.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Fatalf("managedFields %+v", out.ManagedFields)
	}
	want := `{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{"f:holderIdentity":{},"f:leaseDurationSeconds":{},"f:preferredHolder":{},"f:strategy":{}}}`
	if got := string(out.ManagedFields[0].FieldsV1.Raw); got != want {
		t.Errorf("fieldsV1 %s\nwant %s", got, want)
	}
	if l.UID != "client-uid" {
		t.Errorf("Create mutated the caller's object")
	}

	// A create with only a name has no managedFields at all.
	bare := env.mustCreate(t, "default", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	if len(bare.ManagedFields) != 0 {
		t.Errorf("bare create has managedFields %+v", bare.ManagedFields)
	}

	cases := []struct {
		name   string
		scope  Scope
		obj    *coordinationv1.Lease
		opts   *metav1.CreateOptions
		code   int32
		reason metav1.StatusReason
		msg    string
	}{
		{"exists", env.leases("default"), newLease("l1"), nil, 409, metav1.StatusReasonAlreadyExists,
			`leases.coordination.k8s.io "l1" already exists`},
		{"resourceVersion set", env.leases("default"), newLease("rv", func(l *coordinationv1.Lease) { l.ResourceVersion = "5" }), nil, 500, "",
			"resourceVersion should not be set on objects to be created"},
		{"namespace mismatch", env.leases("default"), newLease("ns", func(l *coordinationv1.Lease) { l.Namespace = "other" }), nil, 400, metav1.StatusReasonBadRequest,
			"the namespace of the provided object does not match the namespace sent on the request"},
		{"invalid", env.leases("default"), newLease("Bad_Name", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr[int32](-1) }), nil, 422, metav1.StatusReasonInvalid,
			`Lease.coordination.k8s.io "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0]`},
		{"no name", env.leases("default"), newLease(""), nil, 422, metav1.StatusReasonInvalid,
			`Lease.coordination.k8s.io "" is invalid: metadata.name: Required value: name or generateName is required`},
		{"transitions", env.leases("default"), newLease("t", func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr[int32](-1) }), nil, 422, metav1.StatusReasonInvalid,
			`Lease.coordination.k8s.io "t" is invalid: spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0`},
		{"strategy", env.leases("default"), newLease("s", func(l *coordinationv1.Lease) { l.Spec.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("Foo")) }), nil, 422, metav1.StatusReasonInvalid,
			`Lease.coordination.k8s.io "s" is invalid: spec.strategy.strategy: Unsupported value: "Foo": supported values: "OldestEmulationVersion"`},
		{"preferredHolder", env.leases("default"), newLease("p", func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = ptr("x") }), nil, 422, metav1.StatusReasonInvalid,
			"Lease.coordination.k8s.io \"p\" is invalid: spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"},
		{"dryRun value", env.leases("default"), newLease("d"), &metav1.CreateOptions{DryRun: []string{"Yes"}}, 422, metav1.StatusReasonInvalid,
			`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Yes"]: supported values: "All"`},
		{"fieldValidation", env.leases("default"), newLease("d"), &metav1.CreateOptions{FieldValidation: "Foo"}, 422, metav1.StatusReasonInvalid,
			`CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Foo": supported values: "", "Ignore", "Strict", "Warn"`},
		{"fieldManager", env.leases("default"), newLease("d"), &metav1.CreateOptions{FieldManager: strings.Repeat("m", 129)}, 422, metav1.StatusReasonInvalid,
			`CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes`},
		{"bad label", env.leases("default"), newLease("lb", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"bad key": "v"} }), nil, 422, metav1.StatusReasonInvalid,
			`Lease.coordination.k8s.io "lb" is invalid: metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		{"bad namespace", env.leases("Bad_NS"), newLease("x"), nil, 422, metav1.StatusReasonInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := env.e.Create(ctx, c.scope, c.obj, c.opts)
			st := wantStatus(t, err, c.code, c.reason, c.msg)
			if c.reason == metav1.StatusReasonAlreadyExists && (st.Details == nil || st.Details.Kind != "leases" || st.Details.Group != GroupName) {
				t.Errorf("details %+v", st.Details)
			}
			if c.name == "invalid" && (st.Details.Kind != "Lease" || len(st.Details.Causes) != 2) {
				t.Errorf("details %+v", st.Details)
			}
		})
	}
}

func TestCreateGenerateNameAndDryRun(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	l := newLease("", func(l *coordinationv1.Lease) { l.GenerateName = "gen-" })
	out := env.mustCreate(t, "default", l)
	if !strings.HasPrefix(out.Name, "gen-") || len(out.Name) != len("gen-")+5 {
		t.Errorf("generated name %q", out.Name)
	}
	long := newLease("", func(l *coordinationv1.Lease) { l.GenerateName = strings.Repeat("a", 70) })
	if out := env.mustCreate(t, "default", long); len(out.Name) != 63 {
		t.Errorf("generated name length %d", len(out.Name))
	}

	rev, _ := env.store.CurrentRevision(ctx)
	dry, err := env.e.Create(ctx, env.leases("default"), newLease("dry"), &metav1.CreateOptions{DryRun: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	d := dry.(*coordinationv1.Lease)
	if d.UID == "" || d.CreationTimestamp.IsZero() || d.ResourceVersion != "" {
		t.Errorf("dry run result %+v", d.ObjectMeta)
	}
	if rev2, _ := env.store.CurrentRevision(ctx); rev2 != rev {
		t.Errorf("dry run wrote (rev %d -> %d)", rev, rev2)
	}
	_, err = env.e.Get(ctx, env.leases("default"), "dry", nil)
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "dry" not found`)
	_, err = env.e.Create(ctx, env.leases("default"), newLease(out.Name), &metav1.CreateOptions{DryRun: []string{"All"}})
	wantStatus(t, err, 409, metav1.StatusReasonAlreadyExists, "")
}

// The conformance test writes year-0001 MicroTimes; they must round-trip.
func TestMicroTimeYearOne(t *testing.T) {
	env := newTestEnv(t)
	acquire := metav1.NewMicroTime(time.Time{}.Add(2 * time.Second))
	renew := metav1.NewMicroTime(time.Time{}.Add(5*time.Second + 123456*time.Microsecond))
	env.mustCreate(t, "ns1", newLease("old", func(l *coordinationv1.Lease) {
		l.Spec.AcquireTime = &acquire
		l.Spec.RenewTime = &renew
	}))
	got := env.mustGet(t, "ns1", "old")
	if !got.Spec.AcquireTime.Equal(&acquire) || !got.Spec.RenewTime.Equal(&renew) {
		t.Fatalf("times %v %v, want %v %v", got.Spec.AcquireTime, got.Spec.RenewTime, acquire, renew)
	}
	b, err := got.Spec.RenewTime.MarshalJSON()
	if err != nil || string(b) != `"0001-01-01T00:00:05.123456Z"` {
		t.Fatalf("renewTime JSON %s %v", b, err)
	}
}
