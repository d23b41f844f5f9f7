package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage/boltdb"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// takeUntil drains a batch watcher until cond holds of what it took, or
// fails after a generous deadline.
func takeUntil(t *testing.T, w BatchWatcher, maxBytes int, cond func([]watch.Event) bool) []watch.Event {
	t.Helper()
	var all []watch.Event
	deadline := time.After(20 * time.Second)
	for !cond(all) {
		evs, open, more := w.TakeEvents(nil, maxBytes)
		all = append(all, evs...)
		if !open {
			t.Fatalf("watch ended after %d events", len(all))
		}
		if len(evs) == 0 && !more {
			select {
			case <-w.Ready():
			case <-deadline:
				t.Fatalf("condition not met; %d events", len(all))
			}
		}
	}
	return all
}

// annotated is a lease with one annotation of size bytes.
func annotated(name string, size int) *coordinationv1.Lease {
	return newLease(name, func(l *coordinationv1.Lease) {
		l.Annotations = map[string]string{"fill": strings.Repeat("x", size)}
	})
}

// Initial events are read a page at a time as they are taken: a watch
// with sendInitialEvents over more leases than a page gets every match in
// key order, then the initial-events-end bookmark, then live events.
func TestWatchInitialEventsPaged(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	sc := env.leases("default")
	const n = 3*initialFirstPage + 5
	for i := range n {
		env.mustCreate(t, "default", newLease(fmt.Sprintf("p%03d", i), func(l *coordinationv1.Lease) {
			l.Labels = map[string]string{"odd": fmt.Sprint(i%2 == 1)}
		}))
	}
	w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{SendInitialEvents: ptr(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, LabelSelector: "odd=true"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	bw := w.(BatchWatcher)
	// Small batches: every page boundary is crossed mid-batch.
	evs := takeUntil(t, bw, 1000, func(evs []watch.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].Type == watch.Bookmark
	})
	if len(evs) != n/2+1 {
		t.Fatalf("%d events, want %d ADDED and the bookmark", len(evs), n/2)
	}
	for i, ev := range evs[:len(evs)-1] {
		if want := fmt.Sprintf("p%03d", 2*i+1); ev.Type != watch.Added || ev.Object.(*coordinationv1.Lease).Name != want {
			t.Fatalf("event %d: %s, want ADDED %s", i, describe(ev), want)
		}
	}
	if got := evs[len(evs)-1].Object.(*coordinationv1.Lease).Annotations[initialEventsEndAnnotation]; got != "true" {
		t.Fatalf("last event %s is not the initial-events-end bookmark", describe(evs[len(evs)-1]))
	}
	env.mustCreate(t, "default", newLease("live", func(l *coordinationv1.Lease) { l.Labels = map[string]string{"odd": "true"} }))
	live := takeUntil(t, bw, 1000, func(evs []watch.Event) bool { return len(evs) > 0 })
	if got := describe(live[0]); !strings.HasPrefix(got, "ADDED live@") {
		t.Fatalf("live event %s", got)
	}
}

// A watch whose undelivered events pass its byte budget is closed and
// counted; a watch that keeps up is not, and the queued bytes go back to
// zero once the watches end. Both paths: the shared fan-out and a watch
// from a revision only the store still has.
func TestWatchByteBudgetClosesLaggingWatch(t *testing.T) {
	for _, path := range []string{"shared", "per-watch"} {
		t.Run(path, func(t *testing.T) {
			env := newTestEnvWith(t, boltdb.Options{}, Options{WatchQueueBytes: 64 << 10, WatchQueueBytesTotal: 1 << 20})
			ctx := WithSharedWatchObjects(context.Background())
			sc := env.leases("default")
			first := env.mustCreate(t, "default", newLease("first"))
			if path == "per-watch" {
				// The shared fan-out starts at the current revision: a
				// watch from first's revision needs the store's history.
				env.mustCreate(t, "default", newLease("second"))
			}
			cur, _ := env.store.CurrentRevision(ctx)
			rv := fmt.Sprint(cur)
			if path == "per-watch" {
				rv = first.ResourceVersion
			}
			open := func() BatchWatcher {
				w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: rv})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Stop)
				_, shared := w.(*hubWatcher)
				if shared != (path == "shared") {
					t.Fatalf("watch is %T on the %s path", w, path)
				}
				return w.(BatchWatcher)
			}
			slow, fast := open(), open()
			const objects = 8 // 8 x 20 KB: past the 64 KB budget
			var got int
			for i := range objects {
				env.mustCreate(t, "default", annotated(fmt.Sprint("big", i), 20<<10))
				got += len(takeUntil(t, fast, 1<<20, func(evs []watch.Event) bool {
					for _, ev := range evs {
						if ev.Type == watch.Added && ev.Object.(*coordinationv1.Lease).Name == fmt.Sprint("big", i) {
							return true
						}
					}
					return false
				}))
			}
			evs, isOpen, _ := slow.TakeEvents(nil, 1<<20)
			if isOpen || len(evs) != 0 {
				t.Fatalf("slow watch: %d events, open %v; want closed and emptied", len(evs), isOpen)
			}
			st := env.e.WatchStats()
			if st.LaggingClosed != 1 {
				t.Errorf("LaggingClosed %d, want 1", st.LaggingClosed)
			}
			slow.Stop()
			fast.Stop()
			deadline := time.Now().Add(20 * time.Second)
			for env.e.WatchStats().QueuedBytes != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("QueuedBytes %d after the watches ended", env.e.WatchStats().QueuedBytes)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// The shared budget closes watches that are behind, never one whose queue
// was empty: that one's events are the objects the others hold.
func TestWatchSharedBudgetSparesCurrentWatches(t *testing.T) {
	env := newTestEnvWith(t, boltdb.Options{}, Options{WatchQueueBytes: 100 << 10, WatchQueueBytesTotal: 120 << 10})
	ctx := WithSharedWatchObjects(context.Background())
	sc := env.leases("default")
	cur, _ := env.store.CurrentRevision(ctx)
	var ws []BatchWatcher
	for range 3 {
		w, err := env.e.Watch(ctx, sc, &metav1.ListOptions{ResourceVersion: fmt.Sprint(cur)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w.(BatchWatcher))
	}
	current := ws[2]
	for i := range 6 {
		env.mustCreate(t, "default", annotated(fmt.Sprint("s", i), 20<<10))
		takeUntil(t, current, 1<<20, func(evs []watch.Event) bool { return len(evs) == 1 })
		if used := env.e.WatchStats().QueuedBytes; used > 120<<10+21<<10 {
			t.Fatalf("queued %d bytes, budget %d plus one event", used, 120<<10)
		}
	}
	closed := 0
	for _, w := range ws[:2] {
		if _, open, _ := w.TakeEvents(nil, 1<<20); !open {
			closed++
		}
	}
	if closed == 0 {
		t.Error("no lagging watch was closed for the shared budget")
	}
	if st := env.e.WatchStats(); st.LaggingClosed != uint64(closed) {
		t.Errorf("LaggingClosed %d, closed %d", st.LaggingClosed, closed)
	}
}

// timeoutSeconds beyond what a time.Duration holds is clamped, not
// overflowed into a watch that ends at once.
func TestWatchTimeoutClamped(t *testing.T) {
	for _, secs := range []int64{1<<63 - 1, 1 << 40, int64(MaxWatchTimeout/time.Second) + 1} {
		if got := watchTimeout(&secs); got != MaxWatchTimeout {
			t.Errorf("timeoutSeconds %d: %v, want %v", secs, got, MaxWatchTimeout)
		}
	}
	secs := int64(5)
	if got := watchTimeout(&secs); got != 5*time.Second {
		t.Errorf("timeoutSeconds 5: %v", got)
	}
}
