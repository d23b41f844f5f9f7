package engine

import (
	"context"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

func TestDelete(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	l := env.mustCreate(t, "default", newLease("d1"))

	_, _, err := env.e.Delete(ctx, sc, "d1", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(types.UID("nope"))}})
	st := wantStatus(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(`Operation cannot be fulfilled on Lease.coordination.k8s.io "d1": the UID in the precondition (nope) does not match the UID in record (%s). The object might have been deleted and then recreated`, l.UID))
	if st.Details.Kind != "Lease" {
		t.Errorf("details %+v", st.Details)
	}
	_, _, err = env.e.Delete(ctx, sc, "d1", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr("1")}})
	wantStatus(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(`Operation cannot be fulfilled on Lease.coordination.k8s.io "d1": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (%s). The object might have been modified`, l.ResourceVersion))
	_, _, err = env.e.Delete(ctx, sc, "d1", &metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletionPropagation("Sideways"))})
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil"`)

	out, _, err := env.e.Delete(ctx, sc, "d1", &metav1.DeleteOptions{DryRun: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := out.(*metav1.Status); s.Status != metav1.StatusSuccess || s.Details.UID != l.UID {
		t.Errorf("dry-run status %+v", s)
	}
	env.mustGet(t, "default", "d1")

	out, accepted, err := env.e.Delete(ctx, sc, "d1", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
	if err != nil || accepted {
		t.Fatal(err, accepted)
	}
	s := out.(*metav1.Status)
	want := metav1.StatusDetails{Name: "d1", Group: GroupName, Kind: "leases", UID: l.UID}
	if s.Status != metav1.StatusSuccess || s.Code != 0 || fmt.Sprint(*s.Details) != fmt.Sprint(want) {
		t.Errorf("status %+v %+v", s, s.Details)
	}
	_, _, err = env.e.Delete(ctx, sc, "d1", nil)
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "d1" not found`)
}

func TestDeleteWithFinalizersAndPropagation(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(t, "default", newLease("f1", func(l *coordinationv1.Lease) { l.Finalizers = []string{"example.com/keep"} }))
	env.mustCreate(t, "default", newLease("o1"))

	w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: env.mustGet(t, "default", "o1").ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Orphan: stored with deletionTimestamp + the orphan finalizer (the
	// response), then our garbage-collector stand-in deletes it.
	out, accepted, err := env.e.Delete(ctx, sc, "o1", &metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationOrphan)})
	if err != nil || accepted {
		t.Fatal(err)
	}
	o := out.(*coordinationv1.Lease)
	if o.DeletionTimestamp == nil || fmt.Sprint(o.Finalizers) != "[orphan]" || *o.DeletionGracePeriodSeconds != 0 {
		t.Errorf("orphan delete response %+v", o.ObjectMeta)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Modified {
		t.Errorf("first event %s, want MODIFIED", ev.Type)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Deleted {
		t.Errorf("second event %s, want DELETED", ev.Type)
	}
	_, err = env.e.Get(ctx, sc, "o1", nil)
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, "")

	// A foreign finalizer keeps the object; repeated deletes return it; 202
	// with orphanDependents=false.
	for i := 0; i < 2; i++ {
		out, accepted, err = env.e.Delete(ctx, sc, "f1", &metav1.DeleteOptions{OrphanDependents: ptr(false)})
		if err != nil || !accepted {
			t.Fatal(err, accepted)
		}
		if f := out.(*coordinationv1.Lease); f.DeletionTimestamp == nil {
			t.Errorf("not marked: %+v", f.ObjectMeta)
		}
	}
	// New finalizers cannot be added while deleting.
	f := env.mustGet(t, "default", "f1")
	f.Finalizers = append(f.Finalizers, "example.com/new")
	_, _, err = env.e.Update(ctx, sc, "f1", f, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Lease.coordination.k8s.io "f1" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/new"}`)
	// Removing the last finalizer deletes it; the response is the object.
	f = env.mustGet(t, "default", "f1")
	f.Finalizers = nil
	out, _, err = env.e.Update(ctx, sc, "f1", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.(*coordinationv1.Lease).Name != "f1" {
		t.Errorf("response %+v", out)
	}
	_, err = env.e.Get(ctx, sc, "f1", nil)
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, "")
}

func TestDeleteCollection(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(t, "default", newLease("keep"))
	for i := 0; i < 3; i++ {
		env.mustCreate(t, "default", newLease(fmt.Sprintf("dc%d", i), func(l *coordinationv1.Lease) { l.Labels = map[string]string{"deletecollection": "true"} }))
	}
	env.mustCreate(t, "other", newLease("dc9", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"deletecollection": "true"} }))
	out, err := env.e.DeleteCollection(ctx, sc, &metav1.ListOptions{LabelSelector: "deletecollection=true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := out.(*coordinationv1.LeaseList)
	if got := fmt.Sprint(names(l)); got != "[default/dc0 default/dc1 default/dc2]" || l.ResourceVersion == "" || l.Items[0].Kind != "" {
		t.Errorf("deleted %s %+v", got, l.ListMeta)
	}
	rest, _ := listLeases(t, env, "", nil)
	if got := fmt.Sprint(names(rest)); got != "[default/keep other/dc9]" {
		t.Errorf("left %s", got)
	}
	_, err = env.e.DeleteCollection(ctx, env.leases(""), nil, nil)
	wantStatus(t, err, 405, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
	_, err = env.e.DeleteCollection(ctx, sc, &metav1.ListOptions{FieldSelector: "spec.x=1"}, nil)
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "")
}
