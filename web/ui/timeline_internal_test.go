package ui

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeLeaseWriter plays one lease's writes into a tracker on a fake clock.
type fakeLeaseWriter struct {
	t     *testing.T
	tr    *holderTracker
	clock time.Time
	l     *coordinationv1.Lease
}

func newFakeLeaseWriter(t *testing.T) *fakeLeaseWriter {
	tr := newHolderTracker()
	w := &fakeLeaseWriter{t: t, tr: tr, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr.now = func() time.Time { return w.clock }
	tr.replace(nil)
	dur := int32(10)
	w.l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"}}
	w.l.Spec.LeaseDurationSeconds = &dur
	return w
}

func (w *fakeLeaseWriter) after(d time.Duration) *fakeLeaseWriter { w.clock = w.clock.Add(d); return w }

// hold makes holder acquire (a new holder) or renew (the same one) now.
func (w *fakeLeaseWriter) hold(holder string) {
	l := w.l.DeepCopy()
	now := metav1.NewMicroTime(w.clock)
	if holder == "" {
		l.Spec.HolderIdentity = nil
	} else {
		if holderOf(l) != holder {
			l.Spec.AcquireTime = &now
		}
		l.Spec.HolderIdentity = &holder
		l.Spec.RenewTime = &now
	}
	w.l = l
	w.tr.observe(l, true)
}

func (w *fakeLeaseWriter) prefer(holder string) {
	l := w.l.DeepCopy()
	l.Spec.PreferredHolder = &holder
	w.l = l
	w.tr.observe(l, true)
}

// summary renders the view as "holder:renewals[:flags]" tenures and gaps.
func (w *fakeLeaseWriter) summary() string {
	v, ok := w.tr.view("default", "app")
	if !ok {
		return "<none>"
	}
	var out []string
	for _, tn := range v.Tenures {
		s := fmt.Sprintf("%s:%d", tn.Holder, tn.Renewals)
		if tn.Unconfirmed {
			s += ":unconfirmed"
		}
		if !tn.ExpiredAt.IsZero() {
			s += ":expired"
		}
		out = append(out, s)
	}
	for _, g := range v.Gaps {
		end := "now"
		if !g.End.IsZero() {
			end = "next"
		}
		out = append(out, fmt.Sprintf("gap %gs after %s %s until %s", g.Seconds, g.After, g.Cause, end))
	}
	return strings.Join(out, " ")
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	w := newFakeLeaseWriter(t)
	w.hold("a")
	for range 100 { // renewals are aggregated, not listed
		w.after(2 * time.Second).hold("a")
	}
	w.after(time.Second).hold("b") // a hands over to b
	w.after(2 * time.Second).hold("b")
	w.after(12 * time.Second).hold("b") // b renews 2 s after its lease expired
	w.after(time.Second).hold("")       // b releases
	w.after(5 * time.Second).hold("c")  // c is granted...
	w.after(120 * time.Millisecond).prefer("d")
	w.after(5 * time.Millisecond).hold("d") // ...and redirected to d at once
	w.after(3 * time.Second).hold("d")
	want := "a:100 b:1:expired b:1 c:0:unconfirmed d:1 gap 2s after b expired until next gap 5.125s after b released until next"
	if got := w.summary(); got != want {
		t.Errorf("timeline:\n got %s\nwant %s", got, want)
	}
	// The current holder stops renewing: the lease expires, a gap opens.
	w.after(20 * time.Second)
	if got := w.summary(); !strings.HasSuffix(got, "d:1:expired gap 2s after b expired until next gap 5.125s after b released until next gap 10s after d expired until now") {
		t.Errorf("after d stopped renewing: %s", got)
	}
	// Changes of hands: to b, to d (c never held it; b's return after
	// its expiry is no change).
	tr := w.tr.transitions()
	if counts := tr.Leases["default/app"]; fmt.Sprint(counts[len(counts)-1]) != "2" {
		t.Errorf("transitions: %v", counts)
	}
}

func TestTimelineBounds(t *testing.T) {
	t.Parallel()
	w := newFakeLeaseWriter(t)
	for i := range maxTenures + 10 {
		w.after(time.Second).hold(fmt.Sprintf("h-%d", i))
	}
	v, _ := w.tr.view("default", "app")
	if len(v.Tenures) != maxTenures || v.Tenures[0].Holder != "h-10" {
		t.Errorf("%d tenures kept, first %s; want %d from h-10", len(v.Tenures), v.Tenures[0].Holder, maxTenures)
	}
	// A day later only the current tenure is left.
	w.after(timelineSpan + time.Hour).hold("last")
	if v, _ := w.tr.view("default", "app"); len(v.Tenures) != 2 {
		t.Errorf("%d tenures after a day, want the previous and the current", len(v.Tenures))
	}
	big := strings.Repeat("x", 1000)
	w.after(time.Second).hold(big)
	if v, _ := w.tr.view("default", "app"); len(v.Tenures[len(v.Tenures)-1].Holder) > maxIdentityBytes+len("…") {
		t.Error("identity not clipped")
	}
}

// TestTimelineEvictsLeastRecentlyActive: past maxHolderHistories leases,
// a new lease's timeline replaces the one whose last activity (renewal or
// end) is the oldest, whatever order the leases were first seen in, and
// the eviction order follows renewals and ends as they happen.
func TestTimelineEvictsLeastRecentlyActive(t *testing.T) {
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
	for i := range maxHolderHistories {
		renew(fmt.Sprintf("l-%d", i), "a")
	}
	// l-0 and l-1 renew, l-2 is released: l-3 and l-4 are now the least
	// recently active.
	renew("l-0", "a")
	renew("l-1", "a")
	renew("l-2", "")
	renew("new-1", "b")
	renew("new-2", "b")
	for _, c := range []struct {
		name string
		kept bool
	}{{"l-0", true}, {"l-1", true}, {"l-2", true}, {"l-3", false}, {"l-4", false}, {"l-5", true}, {"new-1", true}, {"new-2", true}} {
		if _, ok := tr.timelines[leaseKey{"default", c.name}]; ok != c.kept {
			t.Errorf("%s: kept %v, want %v", c.name, ok, c.kept)
		}
	}
	if len(tr.timelines) != maxHolderHistories || len(tr.byActivity) != len(tr.timelines) {
		t.Fatalf("%d timelines, %d in the heap; want %d", len(tr.timelines), len(tr.byActivity), maxHolderHistories)
	}
	for i, tl := range tr.byActivity {
		if tl.index != i || tr.timelines[tl.key] != tl || !tl.at.Equal(tl.lastActivity()) {
			t.Fatalf("heap entry %d: index %d, key %v, at %v, activity %v", i, tl.index, tl.key, tl.at, tl.lastActivity())
		}
	}
	// A deleted lease leaves the heap too.
	tr.forget(testLease("default", "l-5", "a"))
	if len(tr.byActivity) != maxHolderHistories-1 {
		t.Errorf("%d in the heap after a deletion, want %d", len(tr.byActivity), maxHolderHistories-1)
	}
}

// TestTimelineListKeepsMostRecentlyActive: a list of more leases than
// maxHolderHistories, in any order, leaves the timelines of the most
// recently renewed ones, and the keys kept are the tracker's own strings,
// not the listed objects'.
func TestTimelineListKeepsMostRecentlyActive(t *testing.T) {
	t.Parallel()
	tr := newHolderTracker()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr.now = func() time.Time { return now }
	const n = maxHolderHistories + 300
	items := make([]coordinationv1.Lease, n)
	for i, j := range rand.Perm(n) {
		// Lease l-j renewed j seconds ago, after taking it an hour ago.
		l := testLease("default", fmt.Sprintf("l-%d", j), "a")
		acq := metav1.NewMicroTime(now.Add(-time.Hour))
		rt := metav1.NewMicroTime(now.Add(-time.Duration(j+1) * time.Second))
		l.Spec.AcquireTime, l.Spec.RenewTime = &acq, &rt
		items[i] = *l
	}
	tr.replace(items)
	if len(tr.timelines) != maxHolderHistories || len(tr.byActivity) != maxHolderHistories {
		t.Fatalf("%d timelines, %d in the heap; want %d", len(tr.timelines), len(tr.byActivity), maxHolderHistories)
	}
	for j := range n {
		_, kept := tr.timelines[leaseKey{"default", fmt.Sprintf("l-%d", j)}]
		if want := j < maxHolderHistories; kept != want {
			t.Fatalf("l-%d (renewed %d s ago): timeline kept %v, want %v (the %d most recently renewed)", j, j+1, kept, want, maxHolderHistories)
		}
	}
	listed := map[*byte]bool{}
	for i := range items {
		listed[unsafe.StringData(items[i].Name)] = true
		if h := items[i].Spec.HolderIdentity; h != nil && *h != "" {
			listed[unsafe.StringData(*h)] = true
		}
	}
	for k := range tr.timelines {
		if listed[unsafe.StringData(k.name)] {
			t.Fatalf("the tracker's key of %s shares the listed object's name", k.name)
		}
	}
	for _, holder := range tr.current {
		if holder != "" && listed[unsafe.StringData(holder)] {
			t.Fatalf("the tracker's holder %s shares the listed object's string", holder)
		}
	}
}

// BenchmarkObserveRenewal is the cost the UI's watch adds to every lease
// renewal the server commits.
func BenchmarkObserveRenewal(b *testing.B) {
	w := newFakeLeaseWriter(&testing.T{})
	w.hold("a")
	ls := make([]*coordinationv1.Lease, 64)
	for i := range ls {
		l := w.l.DeepCopy()
		rt := metav1.NewMicroTime(w.clock.Add(time.Duration(i+1) * time.Millisecond))
		l.Spec.RenewTime = &rt
		ls[i] = l
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.tr.observe(ls[i%len(ls)], true)
	}
}

// BenchmarkObserveRenewalMany is the UI's cost per renewal with many
// leases renewing in turn: within the bound of kept timelines, and past
// it, where a renewal of a lease without a timeline leaves it without
// (it evicted the least recently active one, until renewals stopped
// writing to the store).
func BenchmarkObserveRenewalMany(b *testing.B) {
	for _, n := range []int{maxHolderHistories - 12, 2 * maxHolderHistories} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			tr := newHolderTracker()
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			tr.now = func() time.Time { return clock }
			tr.replace(nil)
			// Two states of each lease, renewed a second apart, taken in
			// turn so that every observation is a renewal.
			ls := make([][2]*coordinationv1.Lease, n)
			for i := range ls {
				for j := range ls[i] {
					l := testLease("default", fmt.Sprintf("l-%d", i), "holder")
					rt := metav1.NewMicroTime(clock.Add(time.Duration(j) * time.Second))
					l.Spec.RenewTime = &rt
					ls[i][j] = l
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				clock = clock.Add(time.Millisecond)
				tr.observe(ls[i%n][(i/n)%2], true)
			}
		})
	}
}
