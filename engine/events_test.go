package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage/boltdb"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (env *testEnv) coreEvents(ns string) Scope {
	r, _ := env.e.ResourceFor("", "v1", "events")
	return Scope{Resource: r, Version: "v1", Namespace: ns, UserAgent: "leasehold-test/v0.0.0"}
}

func (env *testEnv) eventsV1(ns string) Scope {
	r, _ := env.e.ResourceFor(EventsGroupName, "v1", "events")
	return Scope{Resource: r, Version: "v1", Namespace: ns, UserAgent: "leasehold-test/v0.0.0"}
}

func coreEvent(name, ns string, mut ...func(*corev1.Event)) *corev1.Event {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: "l", UID: "u-1", APIVersion: "coordination.k8s.io/v1"},
		Reason:         "Elected", Message: "granted", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "test"},
	}
	for _, m := range mut {
		m(ev)
	}
	return ev
}

func TestEventValidation(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	// core/v1: legacy rules only.
	_, err := env.e.Create(ctx, env.coreEvents("default"), coreEvent("e1", "default", func(ev *corev1.Event) { ev.InvolvedObject.Namespace = "other" }), nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Event "e1" is invalid: involvedObject.namespace: Invalid value: "other": does not match event.namespace`)
	_, err = env.e.Create(ctx, env.coreEvents("default"), coreEvent("e2", "default", func(ev *corev1.Event) {
		ev.EventTime = metav1.NewMicroTime(time.Now())
		ev.Reason = strings.Repeat("r", 129)
	}), nil)
	// Upstream also checks the empty reportingComponent as a qualified name.
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Event "e2" is invalid: [reportingComponent: Required value, reportingComponent: Invalid value: "": name part must be non-empty, `+
		`reportingComponent: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), `+
		`reportingInstance: Required value, action: Required value, reason: Invalid value: "": can have at most 128 characters]`)
	if _, err := env.e.Create(ctx, env.coreEvents("default"), coreEvent("e3", "default"), nil); err != nil {
		t.Fatal(err)
	}
	// events.k8s.io/v1: the strict rules too. Upstream validates the
	// stored (core) form, so the paths are core/v1's (count, not
	// deprecatedCount).
	_, err = env.e.Create(ctx, env.eventsV1("default"), &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e4"}, Reason: "R", Type: "Odd",
		DeprecatedCount: 2}, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Event "e4" is invalid: [eventTime: Required value, type: Invalid value: "": has invalid value: Odd, count: Invalid value: "": needs to be unset]`)
}

func TestEventVersionsShareObjects(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC))
	in := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e"}, EventTime: now, ReportingController: "example.com/ctrl", ReportingInstance: "pod-1",
		Action: "Elect", Reason: "Elected", Type: corev1.EventTypeNormal, Note: "won",
		Regarding: corev1.ObjectReference{Kind: "Lease", Namespace: "team", Name: "l", APIVersion: "coordination.k8s.io/v1"},
		Series:    &eventsv1.EventSeries{Count: 2, LastObservedTime: now},
	}
	if _, err := env.e.Create(ctx, env.eventsV1("team"), in, nil); err != nil {
		t.Fatal(err)
	}
	got, err := env.e.Get(ctx, env.coreEvents("team"), "e", nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := got.(*corev1.Event)
	if ev.Message != "won" || ev.InvolvedObject.Name != "l" || ev.ReportingController != "example.com/ctrl" || ev.Series == nil || ev.Series.Count != 2 {
		t.Fatalf("core/v1 view %+v", ev)
	}
	// regarding.* selects in events.k8s.io/v1, involvedObject.* in core.
	list, err := env.e.List(ctx, env.eventsV1(""), &metav1.ListOptions{FieldSelector: "regarding.name=l,regarding.kind=Lease,reportingController=example.com/ctrl"})
	if err != nil || len(list.(*eventsv1.EventList).Items) != 1 || list.(*eventsv1.EventList).Items[0].Note != "won" {
		t.Fatalf("events.k8s.io list: %v %+v", err, list)
	}
	list, err = env.e.List(ctx, env.coreEvents("team"), &metav1.ListOptions{FieldSelector: "involvedObject.name=other"})
	if err != nil || len(list.(*corev1.EventList).Items) != 0 {
		t.Fatalf("core list: %v %+v", err, list)
	}
	_, err = env.e.List(ctx, env.eventsV1("team"), &metav1.ListOptions{FieldSelector: "involvedObject.name=l"})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "field label not supported: involvedObject.name")
	// A strict update may not change what the event says.
	cur, _ := env.e.Get(ctx, env.eventsV1("team"), "e", nil)
	upd := cur.(*eventsv1.Event).DeepCopy()
	upd.Note = "changed"
	upd.Series.Count = 3
	_, _, err = env.e.Update(ctx, env.eventsV1("team"), "e", upd, nil)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `Event "e" is invalid: message: Invalid value: "changed": field is immutable`)
	upd.Note = "won"
	if _, _, err := env.e.Update(ctx, env.eventsV1("team"), "e", upd, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := env.e.ConvertToTable(ctx, env.coreEvents("team"), got, nil)
	if err != nil || fmt.Sprint(tbl.Rows[0].Cells) != "[0s Normal Elected lease/l  example.com/ctrl, pod-1 won 0s 2 e]" {
		t.Fatalf("table: %v %v", err, tbl.Rows)
	}
}

func TestEventTTLAndBounds(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{EventTTL: time.Hour, EventMaxCount: 10, EventMaxBytes: 1 << 20})
	ctx := context.Background()
	for i := range 5 {
		if _, err := env.e.Create(ctx, env.coreEvents("default"), coreEvent(fmt.Sprintf("old-%d", i), "default"), nil); err != nil {
			t.Fatal(err)
		}
	}
	env.clock.Add(40 * time.Minute)
	for i := range 12 {
		if _, err := env.e.Create(ctx, env.coreEvents("default"), coreEvent(fmt.Sprintf("new-%02d", i), "default"), nil); err != nil {
			t.Fatal(err)
		}
		env.clock.Add(time.Second)
	}
	// Beyond the count bound, the oldest go first, down to 90% of it.
	if err := env.e.sweepEvents(ctx); err != nil {
		t.Fatal(err)
	}
	names := eventNames(t, env)
	if want := "[new-03 new-04 new-05 new-06 new-07 new-08 new-09 new-10 new-11]"; fmt.Sprint(names) != want {
		t.Fatalf("after the bound: %v, want %s", names, want)
	}
	// A recorder's update of a repeated event (count, lastTimestamp)
	// refreshes its TTL.
	env.clock.Add(10 * time.Minute)
	cur, _ := env.e.Get(ctx, env.coreEvents("default"), "new-03", nil)
	ev := cur.(*corev1.Event).DeepCopy()
	ev.Count = 7
	ev.LastTimestamp = metav1.NewTime(env.clock.Now())
	if _, _, err := env.e.Update(ctx, env.coreEvents("default"), "new-03", ev, &metav1.UpdateOptions{FieldManager: "other"}); err != nil {
		t.Fatal(err)
	}
	env.clock.Add(55 * time.Minute)
	if err := env.e.sweepEvents(ctx); err != nil {
		t.Fatal(err)
	}
	if names := eventNames(t, env); fmt.Sprint(names) != "[new-03]" {
		t.Fatalf("after the TTL: %v", names)
	}
}

func TestEventBoundWakesSweeper(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{EventMaxCount: 20})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := env.e.Create(ctx, env.coreEvents("default"), coreEvent(fmt.Sprintf("e-%03d", i), "default"), nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if n := len(eventNames(t, env)); n <= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events stored 20s after crossing a bound of 20", len(eventNames(t, env)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func eventNames(t *testing.T, env *testEnv) []string {
	t.Helper()
	out, err := env.e.List(context.Background(), env.coreEvents(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range out.(*corev1.EventList).Items {
		names = append(names, ev.Name)
	}
	return names
}
