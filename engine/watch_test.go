package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage/boltdb"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// next reads one event or fails after a second.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed")
		}
		return ev
	case <-time.After(2 * time.Second):
		t.Fatalf("no event")
	}
	return watch.Event{}
}

func describe(ev watch.Event) string {
	switch o := ev.Object.(type) {
	case *coordinationv1.Lease:
		return fmt.Sprintf("%s %s@%s %v", ev.Type, o.Name, o.ResourceVersion, o.Annotations)
	case *metav1.Status:
		return fmt.Sprintf("%s %d %s %s", ev.Type, o.Code, o.Reason, o.Message)
	}
	return fmt.Sprintf("%s %T", ev.Type, ev.Object)
}

func TestWatch(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	a := env.mustCreate(t, "default", newLease("a", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"w": "1"} }))
	b := env.mustCreate(t, "default", newLease("b"))

	// RV unset: ADDED for the current state, then live events.
	w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := describe(next(t, w)); got != "ADDED a@"+a.ResourceVersion+" map[]" {
		t.Errorf("got %s", got)
	}
	if got := describe(next(t, w)); got != "ADDED b@"+b.ResourceVersion+" map[]" {
		t.Errorf("got %s", got)
	}

	// sendInitialEvents with bookmarks: initial-events-end bookmark.
	wl, err := env.e.Watch(ctx, sc, &metav1.ListOptions{SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true, LabelSelector: "w=1"})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Stop()
	next(t, wl)
	bm := next(t, wl)
	if got := describe(bm); got != "BOOKMARK @"+b.ResourceVersion+" map[k8s.io/initial-events-end:true]" {
		t.Errorf("bookmark %s", got)
	}
	if o := bm.Object.(*coordinationv1.Lease); o.Kind != "Lease" || o.Name != "" || o.Spec.HolderIdentity != nil {
		t.Errorf("bookmark object %+v", o)
	}

	// Live: relabel a (stops matching w=1), delete b.
	cur := env.mustGet(t, "default", "a")
	cur.Labels = map[string]string{"w": "2"}
	upd, _, err := env.e.Update(ctx, sc, "a", cur, nil)
	if err != nil {
		t.Fatal(err)
	}
	updRV := upd.(*coordinationv1.Lease).ResourceVersion
	if _, _, err := env.e.Delete(ctx, sc, "b", nil); err != nil {
		t.Fatal(err)
	}
	delRV, _ := env.store.CurrentRevision(ctx)

	if got := describe(next(t, w)); got != "MODIFIED a@"+updRV+" map[]" {
		t.Errorf("got %s", got)
	}
	if got := describe(next(t, w)); got != fmt.Sprintf("DELETED b@%d map[]", delRV) {
		t.Errorf("got %s (the delete revision)", got)
	}
	ev := next(t, wl)
	if got := describe(ev); got != "DELETED a@"+updRV+" map[]" || ev.Object.(*coordinationv1.Lease).Labels["w"] != "1" {
		t.Errorf("selector exit %s, want the old object with the new RV", got)
	}

	// Replay from an RV.
	wr, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: a.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Stop()
	var got []string
	for i := 0; i < 3; i++ {
		got = append(got, describe(next(t, wr)))
	}
	if want := fmt.Sprint([]string{"ADDED b@" + b.ResourceVersion + " map[]", "MODIFIED a@" + updRV + " map[]", fmt.Sprintf("DELETED b@%d map[]", delRV)}); fmt.Sprint(got) != want {
		t.Errorf("replay %v\nwant %s", got, want)
	}

	// Too old: one ERROR event, then the end.
	if err := env.store.Compact(ctx, delRV); err != nil {
		t.Fatal(err)
	}
	we, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: a.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	cr, _ := env.store.CompactRevision(ctx)
	if got := describe(next(t, we)); got != fmt.Sprintf("ERROR 410 Expired too old resource version: %s (%d)", a.ResourceVersion, cr) {
		t.Errorf("got %s", got)
	}
	if _, ok := <-we.ResultChan(); ok {
		t.Errorf("watch not closed after ERROR")
	}

	// Option errors come before the stream.
	_, err = env.e.Watch(ctx, sc, &metav1.ListOptions{SendInitialEvents: ptr(true)})
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan`)
	_, err = env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: "5", ResourceVersionMatch: "Exact"})
	wantStatus(t, err, 422, metav1.StatusReasonInvalid, "")
}

func TestWatchTimeoutAndBookmarks(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{BookmarkInterval: 100 * time.Millisecond})
	ctx := context.Background()
	env.mustCreate(t, "default", newLease("x"))
	rv, _ := env.store.CurrentRevision(ctx)
	start := time.Now()
	w, err := env.e.Watch(ctx, env.leases("default"), &metav1.ListOptions{ResourceVersion: fmt.Sprint(rv), AllowWatchBookmarks: true, TimeoutSeconds: ptr[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	bookmarks := 0
	for ev := range w.ResultChan() {
		if ev.Type != watch.Bookmark {
			t.Errorf("unexpected %s", describe(ev))
			continue
		}
		if o := ev.Object.(*coordinationv1.Lease); o.ResourceVersion != fmt.Sprint(rv) {
			t.Errorf("bookmark RV %s, want %d", o.ResourceVersion, rv)
		}
		bookmarks++
	}
	// The timeout ends the stream, not sooner; how much later depends on
	// the machine's load, so only a hang (the range above never ending)
	// would fail the test there.
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("watch lasted %v, want its 1s timeout", d)
	}
	if bookmarks < 3 {
		t.Errorf("%d bookmarks in 1s at a 100ms interval", bookmarks)
	}
}

func TestWatchCandidatesV1alpha2(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.candidates("v1alpha2", "default")
	w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{FieldSelector: "metadata.name=c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := env.e.Create(ctx, env.candidates("v1beta1", "default"), newCandidate("c1"), nil); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w)
	c, ok := ev.Object.(*coordinationv1alpha2.LeaseCandidate)
	if ev.Type != watch.Added || !ok || c.APIVersion != "coordination.k8s.io/v1alpha2" || c.Spec.LeaseName != "lease" {
		t.Fatalf("event %s %#v", ev.Type, ev.Object)
	}
}

// Many watchers share one decode of each storage event.
func TestWatchSharedDecode(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	l := env.mustCreate(t, "default", newLease("s"))
	var ws []watch.Interface
	for i := 0; i < 3; i++ {
		w, err := env.e.Watch(ctx, env.leases(""), &metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	l.Spec.HolderIdentity = ptr("h2")
	if _, _, err := env.e.Update(ctx, env.leases("default"), "s", l, nil); err != nil {
		t.Fatal(err)
	}
	var objs []*coordinationv1.Lease
	for _, w := range ws {
		ev := next(t, w)
		objs = append(objs, ev.Object.(*coordinationv1.Lease))
	}
	// One decode serves every watcher (the nested spec is shared), but each
	// watcher owns its top-level struct, whose TypeMeta encoders write.
	if objs[0].Spec.HolderIdentity != objs[1].Spec.HolderIdentity || objs[1].Spec.HolderIdentity != objs[2].Spec.HolderIdentity || *objs[0].Spec.HolderIdentity != "h2" {
		t.Errorf("watchers got distinct decodes or wrong object")
	}
	if objs[0] == objs[1] || objs[1] == objs[2] {
		t.Errorf("watchers share one top-level object; concurrent encoders would race on its TypeMeta")
	}
}

// A future resourceVersion opens the stream; events come once the store
// passes it.
func TestWatchFutureRV(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	cur, _ := env.store.CurrentRevision(ctx)
	w, err := env.e.Watch(ctx, env.leases("default"), &metav1.ListOptions{ResourceVersion: fmt.Sprint(cur + 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	env.mustCreate(t, "default", newLease("f1"))
	env.mustCreate(t, "default", newLease("f2"))
	if got := describe(next(t, w)); got != fmt.Sprintf("ADDED f2@%d map[]", cur+2) {
		t.Errorf("got %s", got)
	}
}

// TestReleaseMemoryDropsDecodedEvents: the decoded objects watchers share
// are dropped by ReleaseMemory (an idle server kept up to 1,024 of them
// for good), and watching goes on, decoding the next event afresh.
func TestReleaseMemoryDropsDecodedEvents(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	a := env.mustCreate(t, "default", newLease("a"))
	if got := describe(next(t, w)); got != "ADDED a@"+a.ResourceVersion+" map[]" {
		t.Fatalf("got %s", got)
	}
	cached := func() int {
		env.e.decoded.mu.Lock()
		defer env.e.decoded.mu.Unlock()
		return len(env.e.decoded.entries)
	}
	if cached() == 0 {
		t.Fatal("the event was not decoded through the shared cache")
	}
	env.e.ReleaseMemory()
	if n := cached(); n != 0 {
		t.Fatalf("%d decoded objects kept after ReleaseMemory", n)
	}
	env.e.hubsMu.Lock()
	for _, h := range env.e.hubs {
		h.mu.Lock()
		if len(h.ring) != 0 {
			t.Errorf("a shared watch keeps %d recent events after ReleaseMemory", len(h.ring))
		}
		h.mu.Unlock()
	}
	env.e.hubsMu.Unlock()
	// A watch from before the release is served all the same.
	w2, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if got := describe(next(t, w2)); got != "ADDED a@"+a.ResourceVersion+" map[]" {
		t.Fatalf("a watch from before the release: got %s", got)
	}
	cur := env.mustGet(t, "default", "a")
	cur.Annotations = map[string]string{"after": "release"}
	upd, _, err := env.e.Update(ctx, sc, "a", cur, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []watch.Interface{w, w2} {
		if got := describe(next(t, w)); got != "MODIFIED a@"+upd.(*coordinationv1.Lease).ResourceVersion+" map[after:release]" {
			t.Errorf("after ReleaseMemory: got %s", got)
		}
	}
}
