package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestE2EClientGoInformer runs a SharedInformer. client-go 0.37 informers
// use WatchList (sendInitialEvents plus the initial-events-end bookmark);
// the informer must sync through it, without falling back to LIST, and then
// see adds, updates and deletes.
func TestE2EClientGoInformer(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	cfg := restConfig(t, ts, wireProtobuf)
	var reqs requestLog
	reqs.wrap(cfg)
	cs := clientset(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leases := cs.CoordinationV1().Leases("default")
	if _, err := leases.Create(ctx, newLease("pre", nil, "h0"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pre: %v", err)
	}

	events := make(chan string, 100)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Coordination().V1().Leases().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			l := obj.(*coordinationv1.Lease)
			events <- fmt.Sprintf("add %s %s initial=%v", l.Name, *l.Spec.HolderIdentity, initial)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*coordinationv1.Lease), newObj.(*coordinationv1.Lease)
			events <- fmt.Sprintf("update %s %s->%s", n.Name, *o.Spec.HolderIdentity, *n.Spec.HolderIdentity)
		},
		DeleteFunc: func(obj any) {
			if l, ok := obj.(*coordinationv1.Lease); ok {
				events <- "delete " + l.Name
			} else {
				events <- fmt.Sprintf("delete %T", obj)
			}
		},
	})
	if err != nil {
		t.Fatalf("add handler: %v", err)
	}
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop only once ctx is done.
	defer func() { cancel(); factory.Shutdown() }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatalf("informer did not sync within 10s; requests: %q", reqs.all())
	}
	wantEvent(t, events, "add pre h0 initial=true")

	// The sync must have come from a WatchList request, not a LIST.
	if got := reqs.matching("/leases?", "watch=true", "sendInitialEvents=true", "allowWatchBookmarks=true", "resourceVersionMatch=NotOlderThan"); len(got) == 0 {
		t.Errorf("no WatchList request; requests: %q", reqs.all())
	}
	for _, r := range reqs.matching("GET /apis/coordination.k8s.io/v1/namespaces/default/leases?") {
		if !strings.Contains(r, "watch=true") {
			t.Errorf("informer fell back to LIST (%s): the WatchList stream did not satisfy it", r)
		}
	}

	live, err := leases.Create(ctx, newLease("live", nil, "h1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create live: %v", err)
	}
	wantEvent(t, events, "add live h1 initial=false")
	live.Spec.HolderIdentity = new("h2")
	if _, err := leases.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update live: %v", err)
	}
	wantEvent(t, events, "update live h1->h2")
	if err := leases.Delete(ctx, "live", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete live: %v", err)
	}
	wantEvent(t, events, "delete live")

	lister := factory.Coordination().V1().Leases().Lister()
	if l, err := lister.Leases("default").Get("pre"); err != nil || *l.Spec.HolderIdentity != "h0" {
		t.Errorf("lister get pre = %v, %v", l, err)
	}
	if _, err := lister.Leases("default").Get("live"); err == nil {
		t.Errorf("lister still has the deleted lease")
	}
}

func wantEvent(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Errorf("event %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event within 5s, want %q", want)
	}
}

// TestE2EClientGoWatch checks raw watches: a watch from a resourceVersion
// replays later changes in order with their RVs, a watch without one starts
// with synthetic ADDED events, and a label-selector watch turns a label
// change into DELETED.
func TestE2EClientGoWatch(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{wireProtobuf, wireJSON} {
		t.Run(wireName(ct), func(t *testing.T) {
			ts := startServer(t)
			watchReplay(t, clientset(t, restConfig(t, ts, ct)).CoordinationV1().Leases("default"))
		})
	}
}

type leaseClient interface {
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*coordinationv1.Lease, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func watchReplay(t *testing.T, leases leaseClient) {
	ctx := context.Background()
	created, err := leases.Create(ctx, newLease("w", map[string]string{"team": "a"}, "h1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	created.Spec.HolderIdentity = new("h2")
	updated, err := leases.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	relabelled, err := leases.Patch(ctx, "w", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"b"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	if err := leases.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	other, err := leases.Create(ctx, newLease("other", map[string]string{"team": "a"}, "o1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create other: %v", err)
	}

	// Replay from the create's RV: everything after it, in order.
	w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from %s: %v", created.ResourceVersion, err)
	}
	defer w.Stop()
	wantWatch(t, w, watch.Modified, "w", "h2", updated.ResourceVersion)
	wantWatch(t, w, watch.Modified, "w", "h2", relabelled.ResourceVersion)
	deletedRV := wantWatch(t, w, watch.Deleted, "w", "h2", "")
	if !rvLess(t, relabelled.ResourceVersion, deletedRV) || !rvLess(t, deletedRV, other.ResourceVersion) {
		t.Errorf("DELETED event RV %s must be the delete's own RV, between %s and %s", deletedRV, relabelled.ResourceVersion, other.ResourceVersion)
	}
	wantWatch(t, w, watch.Added, "other", "o1", other.ResourceVersion)

	// Live events follow the replay.
	other.Spec.HolderIdentity = new("o2")
	otherUpdated, err := leases.Update(ctx, other, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update other: %v", err)
	}
	wantWatch(t, w, watch.Modified, "other", "o2", otherUpdated.ResourceVersion)

	// Without a resourceVersion: synthetic ADDED for the current state; with
	// a label selector, a lease that stops matching is DELETED.
	w2, err := leases.Watch(ctx, metav1.ListOptions{LabelSelector: "team=a"})
	if err != nil {
		t.Fatalf("watch team=a: %v", err)
	}
	defer w2.Stop()
	wantWatch(t, w2, watch.Added, "other", "o2", otherUpdated.ResourceVersion)
	gone, err := leases.Patch(ctx, "other", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"c"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("relabel other: %v", err)
	}
	wantWatch(t, w2, watch.Deleted, "other", "o2", gone.ResourceVersion)
}

// wantWatch reads one event and checks its type, name, holder and (when
// rv is not empty) resourceVersion; it returns the event's RV.
func wantWatch(t *testing.T, w watch.Interface, typ watch.EventType, name, holder, rv string) string {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed, want %s %s", typ, name)
		}
		l, isLease := ev.Object.(*coordinationv1.Lease)
		if !isLease {
			t.Fatalf("event %s carries %T (%+v), want %s of a Lease", ev.Type, ev.Object, ev.Object, typ)
		}
		h := "<nil>"
		if l.Spec.HolderIdentity != nil {
			h = *l.Spec.HolderIdentity
		}
		if ev.Type != typ || l.Name != name || h != holder || (rv != "" && l.ResourceVersion != rv) {
			t.Errorf("event %s %s holder=%s rv=%s, want %s %s holder=%s rv=%s", ev.Type, l.Name, h, l.ResourceVersion, typ, name, holder, rv)
		}
		return l.ResourceVersion
	case <-time.After(5 * time.Second):
		t.Fatalf("no watch event within 5s, want %s %s", typ, name)
	}
	return ""
}
