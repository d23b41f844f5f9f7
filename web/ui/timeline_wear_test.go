package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// timelineOps counts the storage transactions the timelines cost: every
// Create, Update and Delete of a key under history.TimelineKeyPrefix is
// one submitted to the store's writer (on a cluster member, one raft
// proposal), whether or not the key exists.
type timelineOps struct {
	storage.Interface
	saves, deletes, deletesAbsent atomic.Int64
}

func (c *timelineOps) Create(ctx context.Context, key string, value []byte) (storage.KeyValue, error) {
	if strings.HasPrefix(key, history.TimelineKeyPrefix) {
		c.saves.Add(1)
	}
	return c.Interface.Create(ctx, key, value)
}

func (c *timelineOps) Update(ctx context.Context, key string, value []byte, rev int64) (storage.KeyValue, error) {
	if strings.HasPrefix(key, history.TimelineKeyPrefix) {
		c.saves.Add(1)
	}
	return c.Interface.Update(ctx, key, value, rev)
}

func (c *timelineOps) Delete(ctx context.Context, key string, rev int64) (storage.KeyValue, int64, error) {
	prev, r, err := c.Interface.Delete(ctx, key, rev)
	if strings.HasPrefix(key, history.TimelineKeyPrefix) {
		c.deletes.Add(1)
		if errors.Is(err, storage.ErrNotFound) {
			c.deletesAbsent.Add(1)
		}
	}
	return prev, r, err
}

type opCounts struct{ saves, deletes, deletesAbsent int64 }

func (c *timelineOps) counts() opCounts {
	return opCounts{c.saves.Load(), c.deletes.Load(), c.deletesAbsent.Load()}
}

func (a opCounts) minus(b opCounts) opCounts {
	return opCounts{a.saves - b.saves, a.deletes - b.deletes, a.deletesAbsent - b.deletesAbsent}
}

func (a opCounts) writes() int64 { return a.saves + a.deletes }

func (a opCounts) String() string {
	return fmt.Sprintf("%d saves, %d deletes (%d of keys never written)", a.saves, a.deletes, a.deletesAbsent)
}

// wearRig is a real engine on a real bbolt file, watched by a holder
// tracker whose timelines go to a history store over that file; the test
// runs the tracker's flushes itself (flush(false) is the tracker's
// one-second tick, flush(true) its flush at shutdown), so what each one
// writes is counted exactly.
type wearRig struct {
	t     testing.TB
	ctx   context.Context
	eng   *engine.Engine
	scope engine.Scope
	ops   *timelineOps
	hist  *history.Store
	// commits counts the bbolt transactions (each at least 16 KiB and
	// two syncs on the device).
	commits atomic.Int64
	log     *slog.Logger
	syncs   int
	// tr is the running tracker; stop ends its watch.
	tr   *holderTracker
	stop func()
}

func newWearRig(t testing.TB) *wearRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &wearRig{t: t, ctx: ctx, log: slog.New(slog.DiscardHandler)}
	st, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "leasehold.db"), boltdb.Options{
		OnCommit: func(time.Duration, int, error) { r.commits.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); st.Close() })
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := eng.ResourceFor(engine.GroupName, "v1", "leases")
	r.eng, r.scope, r.ops = eng, engine.Scope{Resource: res, Version: "v1", Namespace: "fleet"}, &timelineOps{Interface: st}
	r.hist = history.New(r.ops, nil)
	r.start()
	return r
}

// start runs a new tracker (a server start): it loads the stored
// timelines, then lists and watches the leases.
func (r *wearRig) start() {
	r.t.Helper()
	tr := newHolderTracker()
	tr.store = r.hist
	tr.load(r.ctx, r.log)
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	// No store for run: it would start its own flush loop; this tracker
	// has its store already and the test flushes.
	go func() { defer close(done); tr.run(ctx, r.eng, nil, r.log) }()
	r.tr, r.stop = tr, sync.OnceFunc(func() { cancel(); <-done })
	r.t.Cleanup(r.stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tr.mu.Lock()
		listed := !tr.since.IsZero()
		tr.mu.Unlock()
		if listed {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the tracker did not list the leases within 30 s")
		}
	}
}

// each runs f for leases 0..n-1 on 8 goroutines (the store's writer
// commits what arrives together in one transaction, as under a fleet).
func (r *wearRig) each(from, to int, f func(i int) error) {
	r.t.Helper()
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Int64{}
	next.Store(int64(from))
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < to; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		r.t.Fatal(err)
	}
}

func leaseName(i int) string { return fmt.Sprintf("l-%04d", i) }

func (r *wearRig) create(i int, holder string) error {
	now := metav1.NewMicroTime(time.Now())
	dur := int32(3600)
	_, err := r.eng.Create(r.ctx, r.scope, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName(i)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now},
	}, &metav1.CreateOptions{})
	return err
}

// renew moves the lease's renewTime (same holder) or, with acquire,
// gives it to holder.
func (r *wearRig) renew(i int, holder string, acquire bool) error {
	now := metav1.NewMicroTime(time.Now()).UTC().Format(metav1.RFC3339Micro)
	patch := fmt.Sprintf(`{"spec":{"holderIdentity":%q,"renewTime":%q}}`, holder, now)
	if acquire {
		patch = fmt.Sprintf(`{"spec":{"holderIdentity":%q,"renewTime":%q,"acquireTime":%q}}`, holder, now, now)
	}
	_, _, err := r.eng.Patch(r.ctx, r.scope, leaseName(i), types.MergePatchType, []byte(patch), &metav1.PatchOptions{})
	return err
}

// sync waits until the tracker has seen every write made so far: it
// creates a lease without a holder (which costs the timelines nothing)
// and waits for the watch to deliver it, after all earlier events.
func (r *wearRig) sync() {
	r.t.Helper()
	r.syncs++
	name := fmt.Sprintf("sync-%d", r.syncs)
	scope := r.scope
	scope.Namespace = "sync"
	if _, err := r.eng.Create(r.ctx, scope, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, &metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r.tr.mu.Lock()
		_, seen := r.tr.current[r.tr.currentKey(leaseKey{"sync", name})]
		r.tr.mu.Unlock()
		if seen {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the tracker did not see lease sync/%s within 30 s", name)
		}
	}
}

// flush runs one of the tracker's one-second flushes (all: the one that
// also saves what only renewals changed) once it has seen every write.
func (r *wearRig) flush(all bool) {
	r.sync()
	r.tr.flush(r.ctx, all, r.log)
}

// wearRun is what a fleet of n leases cost the timelines.
type wearRun struct {
	n, rounds int
	// setup: creating the leases, flushed every 1,000 creations (a fleet
	// created at 1,000 leases a second).
	setup opCounts
	// renewals: rounds × n renewals by the same holders, flushed every
	// half round (leases renewed every 2 s against the 1 s flush tick).
	renewals opCounts
	// shutdown: the flush that also saves the timelines only renewals
	// changed, after them, and the bbolt commits it took.
	shutdown        opCounts
	shutdownCommits int64
	// restart: loading the stored timelines, listing the leases and the
	// first flush, in a new tracker.
	restart opCounts
	// change: one holder change on each of 10 leases, flushed.
	change opCounts
	// kept: each kept timeline as the page shows it, after the renewals
	// and again after the restart.
	kept, keptAfterRestart map[leaseKey]string
	// memory after the renewals: timelines kept, keys queued to save now,
	// at shutdown, to delete.
	timelines, urgent, lazy, gone int
}

func (w wearRun) perRenewal() float64 {
	return float64(w.renewals.writes()) / float64(w.n*w.rounds)
}

// shown renders each kept timeline as its tenures (holder:renewals).
func (t *holderTracker) shown() map[leaseKey]string {
	t.mu.Lock()
	var keys []leaseKey
	for k := range t.timelines {
		keys = append(keys, k)
	}
	t.mu.Unlock()
	out := map[leaseKey]string{}
	for _, k := range keys {
		v, _ := t.view(k.namespace, k.name)
		var s []string
		for _, tn := range v.Tenures {
			s = append(s, fmt.Sprintf("%s:%d", tn.Holder, tn.Renewals))
		}
		out[leaseKey{k.namespace, k.name}] = strings.Join(s, " ")
	}
	return out
}

func measureWear(t testing.TB, n, rounds int) wearRun {
	t.Helper()
	r := newWearRig(t)
	w := wearRun{n: n, rounds: rounds}
	c0 := r.ops.counts()
	for from := 0; from < n; from += 1000 {
		r.each(from, min(from+1000, n), func(i int) error { return r.create(i, fmt.Sprintf("holder-%d", i)) })
		r.flush(false)
	}
	r.flush(false)
	c1 := r.ops.counts()
	w.setup = c1.minus(c0)
	for range rounds {
		for _, half := range [][2]int{{0, n / 2}, {n / 2, n}} {
			r.each(half[0], half[1], func(i int) error { return r.renew(i, fmt.Sprintf("holder-%d", i), false) })
			r.flush(false)
		}
	}
	c2 := r.ops.counts()
	w.renewals = c2.minus(c1)
	w.kept = r.tr.shown()
	r.tr.mu.Lock()
	w.timelines, w.urgent, w.lazy, w.gone = len(r.tr.timelines), len(r.tr.urgent), len(r.tr.lazy), len(r.tr.gone)
	r.tr.mu.Unlock()
	r.stop()
	commits := r.commits.Load()
	r.tr.flush(r.ctx, true, r.log)
	c3 := r.ops.counts()
	w.shutdown, w.shutdownCommits = c3.minus(c2), r.commits.Load()-commits
	r.start()
	r.flush(false)
	c4 := r.ops.counts()
	w.restart = c4.minus(c3)
	w.keptAfterRestart = r.tr.shown()
	// Holder changes still reach the store within a flush.
	r.each(0, 10, func(i int) error { return r.renew(i*(n/10), "successor", true) })
	r.flush(false)
	w.change = r.ops.counts().minus(c4)
	return w
}

// TestTimelineWritesPerRenewal counts the storage transactions the lease
// timelines cost a fleet of leases on a real engine and bbolt file: none
// for a renewal however many leases there are, none for a timeline
// forgotten before it was saved, none at a restart; a write per change of
// hands; at most maxHolderHistories at shutdown. The page shows the kept
// timelines as their renewals made them, also after the restart.
func TestTimelineWritesPerRenewal(t *testing.T) {
	t.Parallel()
	// Within the bound of kept timelines and past it (BenchmarkTimelineWrites
	// reports more sizes).
	for _, n := range []int{100, 600} {
		t.Run(fmt.Sprintf("leases=%d", n), func(t *testing.T) {
			const rounds = 2
			w := measureWear(t, n, rounds)
			t.Log(w)
			if w.renewals.writes() != 0 {
				t.Errorf("%d renewals of %d leases by their holders cost the timelines %v, want no write", n*rounds, n, w.renewals)
			}
			if w.setup.saves > int64(n) || w.setup.deletesAbsent != 0 {
				t.Errorf("creating %d leases cost %v, want at most a save per lease and no delete of a key never written", n, w.setup)
			}
			if w.shutdown.saves > maxHolderHistories || w.shutdown.deletes != 0 {
				t.Errorf("shutdown: %v, want at most %d saves and no delete", w.shutdown, maxHolderHistories)
			}
			if w.restart.writes() != 0 {
				t.Errorf("a restart with %d leases cost the timelines %v, want no write", n, w.restart)
			}
			if w.change.saves != 10 || w.change.deletes > 10 || w.change.deletesAbsent != 0 {
				t.Errorf("10 changes of hands: %v, want 10 saves, at most 10 deletes (evictions of stored timelines), none of a key never written", w.change)
			}
			if want := min(n, maxHolderHistories); w.timelines != want || w.urgent != 0 || w.lazy > want || w.gone != 0 {
				t.Errorf("after the renewals: %d timelines, %d/%d/%d keys queued to save, save at shutdown, delete; want %d timelines and at most %d queued, at shutdown",
					w.timelines, w.urgent, w.lazy, w.gone, want, want)
			}
			// What the page shows of the kept leases: the holder that took
			// each, with every renewal counted.
			for k, got := range w.kept {
				var i int
				fmt.Sscanf(k.name, "l-%d", &i)
				if want := fmt.Sprintf("holder-%d:%d", i, rounds); got != want {
					t.Fatalf("timeline of %s/%s: %q, want %q", k.namespace, k.name, got, want)
				}
			}
			// A restart keeps the same timelines, with one more renewal
			// each (the restart's list sees the lease's renewTime, not the
			// server's time the last renewal was seen at).
			if len(w.keptAfterRestart) != len(w.kept) {
				t.Errorf("%d timelines after the restart, %d before", len(w.keptAfterRestart), len(w.kept))
			}
			for k, before := range w.kept {
				var i int
				fmt.Sscanf(k.name, "l-%d", &i)
				if after, want := w.keptAfterRestart[k], fmt.Sprintf("holder-%d:%d", i, rounds+1); after != want {
					t.Fatalf("timeline of %s/%s after the restart: %q (before: %q), want %q", k.namespace, k.name, after, before, want)
				}
			}
		})
	}
}

func (w wearRun) String() string {
	return fmt.Sprintf("%d leases: setup %v; %d renewals: %v (%.3f writes per renewal); shutdown %v in %d bbolt commits; restart %v; 10 holder changes %v; %d timelines kept, %d/%d/%d keys queued",
		w.n, w.setup, w.n*w.rounds, w.renewals, w.perRenewal(), w.shutdown, w.shutdownCommits, w.restart, w.change, w.timelines, w.urgent, w.lazy, w.gone)
}

// BenchmarkTimelineWrites reports the storage transactions the lease
// timelines cost per renewal (writes/renewal), per lease created
// (setup-writes/lease) and at shutdown, for fleets within and past the
// bound of kept timelines (TestTimelineWritesPerRenewal's scenario).
func BenchmarkTimelineWrites(b *testing.B) {
	for _, n := range []int{100, 512, 600, 2000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			var w wearRun
			for b.Loop() {
				w = measureWear(b, n, 2)
			}
			b.Log(w)
			b.ReportMetric(w.perRenewal(), "writes/renewal")
			b.ReportMetric(float64(w.setup.writes())/float64(n), "setup-writes/lease")
			b.ReportMetric(float64(w.setup.deletesAbsent), "deletes-never-written")
			b.ReportMetric(float64(w.shutdown.writes()), "shutdown-writes")
			b.ReportMetric(float64(w.shutdownCommits), "shutdown-commits")
		})
	}
}

// TestTimelineKeptOnChangesOfHands: past maxHolderHistories leases, a
// renewal of a lease without a timeline makes none (it made one, and
// evicted another, on nearly every renewal); its next change of hands
// does. Forgetting a timeline queues a delete only when the store holds
// it.
func TestTimelineKeptOnChangesOfHands(t *testing.T) {
	t.Parallel()
	tr := newHolderTracker()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr.now = func() time.Time { return clock }
	tr.replace(nil)
	renew := func(name, holder string) {
		clock = clock.Add(time.Second)
		l := testLease("default", name, holder)
		rt := metav1.NewMicroTime(clock)
		l.Spec.RenewTime = &rt
		tr.observe(l, true)
	}
	for i := range maxHolderHistories + 1 {
		renew(leaseName(i), "a")
	}
	// l-0000 was evicted for the last one, before any flush: nothing to
	// delete.
	first, last := leaseKey{"default", leaseName(0)}, leaseKey{"default", leaseName(maxHolderHistories)}
	if _, ok := tr.timelines[first]; ok || len(tr.gone) != 0 {
		t.Fatalf("the first lease's timeline kept %v, %d deletes queued; want evicted, none queued (it was never saved)", ok, len(tr.gone))
	}
	renew(leaseName(0), "a")
	if _, ok := tr.timelines[first]; ok {
		t.Fatal("a renewal of a lease without a timeline made one")
	}
	if _, ok := tr.timelines[leaseKey{"default", leaseName(1)}]; !ok {
		t.Fatal("a renewal of a lease without a timeline evicted another")
	}
	// As if a flush had saved them all.
	for _, tl := range tr.timelines {
		tl.stored = true
	}
	clear(tr.urgent)
	renew(leaseName(0), "b")
	if v, _ := tr.view("default", leaseName(0)); len(v.Tenures) != 1 || v.Tenures[0].Holder != "b" {
		t.Fatalf("after a change of hands: %+v, want b's tenure", v.Tenures)
	}
	if _, ok := tr.timelines[leaseKey{"default", leaseName(1)}]; ok || !tr.gone[leaseKey{"default", leaseName(1)}] || !tr.urgent[first] {
		t.Fatalf("the change of hands should evict l-0001's stored timeline (a delete) and save l-0000's: gone %v, urgent %v", tr.gone, tr.urgent)
	}
	// l-0001 changes hands back before the flush: its new timeline
	// replaces the stored document instead of deleting it.
	renew(leaseName(1), "c")
	if k := (leaseKey{"default", leaseName(1)}); tr.gone[k] || !tr.urgent[k] || !tr.timelines[k].stored {
		t.Fatalf("l-0001 back: gone %v, urgent %v", tr.gone, tr.urgent)
	}
	if _, ok := tr.timelines[last]; !ok {
		t.Fatal("the most recently active timeline was evicted")
	}
}

// TestTimelineLoadKeepsMostRecent: stored documents beyond
// maxHolderHistories (left by a failed delete, say) are read once: the
// most recently active are kept, the others deleted from the store by the
// first flush.
func TestTimelineLoadKeepsMostRecent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "leasehold.db"), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ops := &timelineOps{Interface: st}
	hist := history.New(ops, nil)
	const n = maxHolderHistories + 8
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &wearRig{t: t}
	r.each(0, n, func(i int) error {
		// Lease i last renewed i seconds after base.
		at := base.Add(time.Duration(i) * time.Second)
		doc := fmt.Sprintf(`{"since":%q,"tenures":[{"holder":"a","start":%q,"lastRenew":%q,"renewals":1,"durationSeconds":10}]}`,
			base.Format(time.RFC3339), base.Format(time.RFC3339), at.Format(time.RFC3339))
		return hist.SaveTimeline(ctx, "default", leaseName(i), []byte(doc))
	})
	tr := newHolderTracker()
	tr.store = hist
	log := slog.New(slog.DiscardHandler)
	tr.load(ctx, log)
	if len(tr.timelines) != maxHolderHistories || len(tr.gone) != n-maxHolderHistories {
		t.Fatalf("loaded %d timelines, %d queued for deletion; want %d and %d", len(tr.timelines), len(tr.gone), maxHolderHistories, n-maxHolderHistories)
	}
	c0 := ops.counts()
	tr.flush(ctx, false, log)
	if got := ops.counts().minus(c0); got.saves != 0 || got.deletes != n-maxHolderHistories || got.deletesAbsent != 0 {
		t.Fatalf("first flush: %v, want the %d least recently active deleted", got, n-maxHolderHistories)
	}
	docs, err := hist.Timelines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		_, stored := docs[types.NamespacedName{Namespace: "default", Name: leaseName(i)}]
		if want := i >= n-maxHolderHistories; stored != want {
			t.Fatalf("%s (renewed %d s after the first): stored %v, want %v", leaseName(i), i, stored, want)
		}
	}
}
