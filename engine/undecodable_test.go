package engine

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// brokenLease is a stored Lease whose first length prefix (ObjectMeta's)
// claims more bytes than follow: what a damaged record looks like.
func brokenLease(t *testing.T, name string) []byte {
	t.Helper()
	b, err := newLease(name).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0x0a { // field 1 (metadata), length-delimited
		t.Fatalf("unexpected encoding %x", b[:2])
	}
	b[1] = 0x7f
	return b
}

// TestUndecodableRecordIsolated: one damaged lease is skipped by lists and
// watches (with a Warning), answers the corrupt object error to GET, PUT
// and a plain DELETE, and is removed by an unsafe DELETE.
func TestUndecodableRecordIsolated(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(t, "default", newLease("a"))
	key := "/registry/coordination.k8s.io/leases/default/broken"
	if _, err := env.store.Create(ctx, key, brokenLease(t, "broken")); err != nil {
		t.Fatal(err)
	}
	env.mustCreate(t, "default", newLease("z"))
	const warning = "lease default/broken was left out: its stored value cannot be decoded; delete it with ignoreStoreReadErrorWithClusterBreakingPotential=true"

	for _, ns := range []string{"default", ""} {
		var w Warnings
		wctx := WithWarnings(ctx, &w)
		out, err := env.e.List(wctx, env.leases(ns), &metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %q: %v", ns, err)
		}
		if items := out.(*coordinationv1.LeaseList).Items; len(items) != 2 || items[0].Name != "a" || items[1].Name != "z" {
			t.Errorf("list %q: %d items", ns, len(items))
		}
		if got := w.List(); len(got) != 1 || got[0] != warning {
			t.Errorf("list %q warnings %q", ns, got)
		}
		// The stored-format fast path declines, so the caller lists.
		if body, ok, err := env.e.ListJSON(ctx, env.leases(ns), &metav1.ListOptions{}); ok || err != nil {
			t.Errorf("ListJSON %q answered ok=%v err=%v: %s", ns, ok, err, body)
		}
	}
	// A page of one skips it and still fills the page.
	var w Warnings
	out, err := env.e.List(WithWarnings(ctx, &w), sc, &metav1.ListOptions{Limit: 1, Continue: mustContinue(t, env, sc)})
	if err != nil {
		t.Fatal(err)
	}
	if items := out.(*coordinationv1.LeaseList).Items; len(items) != 1 || items[0].Name != "z" {
		t.Errorf("second page %+v", items)
	}

	const corrupt = "StorageError: corrupt object, Code: 6, Key: /registry/leases/default/broken, ResourceVersion: 0, AdditionalErrorMsg: decoding Lease: "
	_, err = env.e.Get(ctx, sc, "broken", &metav1.GetOptions{})
	if st := statusOf(t, err); st.Code != 500 || st.Reason != "" || !strings.HasPrefix(st.Message, corrupt) {
		t.Errorf("GET: %d %q %q", st.Code, st.Reason, st.Message)
	}
	if _, ok, err := env.e.GetJSON(ctx, sc, "broken", &metav1.GetOptions{}); ok || err != nil {
		t.Errorf("GetJSON answered ok=%v err=%v", ok, err)
	}
	_, _, err = env.e.Update(ctx, sc, "broken", newLease("broken"), nil)
	if st := statusOf(t, err); st.Code != 500 || !strings.HasPrefix(st.Message, corrupt) {
		t.Errorf("PUT: %d %q", st.Code, st.Message)
	}
	_, _, err = env.e.Delete(ctx, sc, "broken", nil)
	if st := statusOf(t, err); st.Code != 500 || !strings.HasPrefix(st.Message, corrupt) {
		t.Errorf("plain DELETE: %d %q", st.Code, st.Message)
	}
	if st := env.e.UndecodableRecords(); st.Records != 1 || len(st.Keys) != 1 || st.Keys[0] != key || st.Skipped == 0 {
		t.Errorf("UndecodableRecords %+v", st)
	}

	// The unsafe delete refuses preconditions, as upstream, then deletes.
	unsafe := &metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: ptr(true), Preconditions: &metav1.Preconditions{UID: ptr[types.UID]("x")}}
	_, _, err = env.e.Delete(ctx, sc, "broken", unsafe)
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, "")
	unsafe.Preconditions = nil
	unsafe.DryRun = []string{metav1.DryRunAll}
	if _, _, err := env.e.Delete(ctx, sc, "broken", unsafe); err != nil {
		t.Fatalf("dry-run unsafe DELETE: %v", err)
	}
	unsafe.DryRun = nil
	res, _, err := env.e.Delete(ctx, sc, "broken", unsafe)
	if err != nil {
		t.Fatalf("unsafe DELETE: %v", err)
	}
	if st, ok := res.(*metav1.Status); !ok || st.Status != metav1.StatusSuccess || st.Details.Name != "broken" {
		t.Errorf("unsafe DELETE answered %+v", res)
	}
	_, err = env.e.Get(ctx, sc, "broken", &metav1.GetOptions{})
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, "")
	if st := env.e.UndecodableRecords(); st.Records != 0 {
		t.Errorf("after delete: %+v", st)
	}
	// On a decodable object the option is an ordinary delete.
	if _, _, err := env.e.Delete(ctx, sc, "a", unsafe); err != nil {
		t.Errorf("DELETE a with the option: %v", err)
	}
}

func mustContinue(t *testing.T, env *testEnv, sc Scope) string {
	t.Helper()
	out, err := env.e.List(context.Background(), sc, &metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := out.(*coordinationv1.LeaseList)
	if len(l.Items) != 1 || l.Items[0].Name != "a" || l.Continue == "" {
		t.Fatalf("first page %d items, continue %q", len(l.Items), l.Continue)
	}
	return l.Continue
}

// TestUndecodableRecordWatch: watches skip a damaged record, in their
// initial events and live, and deliver the events around it.
func TestUndecodableRecordWatch(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	env.mustCreate(t, "default", newLease("a"))
	if _, err := env.store.Create(ctx, "/registry/coordination.k8s.io/leases/default/broken", brokenLease(t, "broken")); err != nil {
		t.Fatal(err)
	}
	var warnings Warnings
	w, err := env.e.Watch(WithWarnings(ctx, &warnings), sc, &metav1.ListOptions{SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := describe(next(t, w)); !strings.HasPrefix(got, "ADDED a@") {
		t.Errorf("first event %s", got)
	}
	if got := next(t, w); got.Type != "BOOKMARK" {
		t.Errorf("second event %s", describe(got))
	}
	if len(warnings.List()) != 1 {
		t.Errorf("warnings %q", warnings.List())
	}
	if _, err := env.store.Create(ctx, "/registry/coordination.k8s.io/leases/default/broken2", brokenLease(t, "broken2")); err != nil {
		t.Fatal(err)
	}
	env.mustCreate(t, "default", newLease("b"))
	for {
		ev := next(t, w)
		if ev.Type == "BOOKMARK" {
			continue
		}
		if got := describe(ev); !strings.HasPrefix(got, "ADDED b@") {
			t.Errorf("live event %s", got)
		}
		break
	}
	if st := env.e.UndecodableRecords(); st.Records != 2 {
		t.Errorf("UndecodableRecords %+v", st)
	}
}
