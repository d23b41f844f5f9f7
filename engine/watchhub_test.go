package engine

import (
	"context"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A watch starting a few revisions back joins the running shared fan-out
// through its ring of recent events, and gets exactly the events after
// its resourceVersion.
func TestWatchHubRingJoin(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	cur, _ := env.store.CurrentRevision(ctx)
	first, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: fmt.Sprint(cur)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	var rvs []string
	for i := range 3 {
		rvs = append(rvs, env.mustCreate(t, "default", newLease(fmt.Sprint("r", i))).ResourceVersion)
	}
	for range 3 {
		next(t, first)
	}
	late, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: rvs[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Stop()
	if _, ok := late.(*hubWatcher); !ok {
		t.Fatalf("late watch is %T, want one served by the shared fan-out", late)
	}
	for _, want := range rvs[1:] {
		ev := next(t, late)
		if got := ev.Object.(*coordinationv1.Lease).ResourceVersion; ev.Type != watch.Added || got != want {
			t.Fatalf("got %s %s, want ADDED %s", ev.Type, got, want)
		}
	}
}

// A watcher that does not take its events is closed once it holds
// hubQueueLimit of them; the others keep receiving.
func TestWatchHubSlowWatcherClosed(t *testing.T) {
	defer func(n int) { hubQueueLimit = n }(hubQueueLimit)
	hubQueueLimit = 3
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	cur, _ := env.store.CurrentRevision(ctx)
	opts := &metav1.ListOptions{ResourceVersion: fmt.Sprint(cur)}
	slow, err := env.e.Watch(WithSharedWatchObjects(ctx), sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	fast, err := env.e.Watch(ctx, sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	for i := range 5 {
		env.mustCreate(t, "default", newLease(fmt.Sprint("s", i)))
		next(t, fast)
	}
	bw := slow.(BatchWatcher)
	evs, open, _ := bw.TakeEvents(nil, 1<<20)
	if open || len(evs) != 0 {
		t.Fatalf("slow watcher: %d events, open %v; want closed and emptied", len(evs), open)
	}
}
