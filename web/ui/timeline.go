package ui

import (
	"container/heap"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// The timeline of a Lease: who held it over the last day, as tenures. A
// tenure is one holder from the moment the server saw it take the lease
// to the moment another holder (or none) replaced it, with its renewals
// aggregated into a count and the last one's time, so that a lease
// renewed every two seconds costs one entry, not forty thousand a day.
// Expiries and the gaps between tenures are derived from the tenures when
// the page asks (view), never stored.
//
// Bounds: at most maxTenures tenures per lease, none that ended more than
// timelineSpan ago, for the same maxHolderHistories leases as the holder
// changes; identities clipped to maxIdentityBytes. Worst case about 48 ×
// 330 bytes per lease (8 MiB for 512 leases of 253-byte identities),
// typically a few KiB in all. The timelines are stored through
// Sources.Timelines (TimelineStore) so that a restart keeps them. Edge
// devices store on flash, so only a change of hands writes: a lease's
// document is written within flushUrgent of a holder change (with the
// renewals counted until then); renewals alone are written at shutdown
// only, however many leases renew (after a crash the lease's own
// renewTime still tells the last renewal, and only the count of the
// renewals since the last change of hands is short). A renewal of a lease
// without a kept timeline makes none (it gets one when it next changes
// hands), and a timeline forgotten before it was ever saved costs the
// store no delete. A stored document is at most about 24 KiB.
//
// Memory: the timelines above, plus three queues of keys (to save now,
// at shutdown, to delete). The first two hold kept timelines only (at
// most maxHolderHistories keys each); the third holds stored timelines
// forgotten since the last flush, and a timeline becomes stored only in a
// flush, which also empties it: at most maxHolderHistories keys, besides
// the stored documents load found beyond the bound.
const (
	maxTenures   = 48
	timelineSpan = 25 * time.Hour
	// redirectWindow: a holder replaced this soon without renewing never
	// acted on its grant (the election controller redirected it, or it
	// lost a race): it is shown as a grant, not as a tenure.
	redirectWindow = time.Second
	// expirySlack absorbs the delay between a renewal's write and the
	// watch event that shows it, before a late renewal counts as the
	// lease having expired in between.
	expirySlack = 500 * time.Millisecond
	// minGap: shorter times without a holder (a release answered by a
	// grant, a redirected grant) are hand-overs, not gaps.
	minGap      = time.Second
	flushUrgent = time.Second
)

// Tenure is one holder's time with a lease.
type Tenure struct {
	Holder string `json:"holder"`
	// Start is when the server saw the holder take the lease (for a lease
	// found held when the server started watching: its acquireTime).
	Start time.Time `json:"start"`
	// LastRenew is the last renewal seen (Start when none).
	LastRenew time.Time `json:"lastRenew"`
	Renewals  int       `json:"renewals"`
	// DurationSeconds is spec.leaseDurationSeconds at the last renewal.
	DurationSeconds int32 `json:"durationSeconds"`
	// End is when another holder or none replaced it; zero while current.
	End time.Time `json:"end,omitzero"`
	// Ended is why it ended: "changed", "released", "expired" (the same
	// holder came back after the lease had expired), "deleted".
	Ended string `json:"ended,omitempty"`
	// Unconfirmed marks a grant the holder never acted on: replaced
	// within redirectWindow, or redirected (preferredHolder set to
	// another) before any renewal.
	Unconfirmed bool `json:"unconfirmed,omitempty"`

	// live is set when the server saw the tenure begin; renewSeen is the
	// renewTime last seen and redirected a preferredHolder naming another
	// before any renewal. None of them is stored.
	live       bool
	renewSeen  time.Time
	redirected bool
}

// TimelineDoc is one lease's stored timeline document.
type TimelineDoc struct {
	Since   time.Time `json:"since"`
	Tenures []Tenure  `json:"tenures"`

	// The tracker's bookkeeping, not stored: the lease, the last
	// activity (lastActivity) the timeline is ordered by in the
	// tracker's heap, at index, and whether the store may hold a
	// document of the lease (one was loaded or handed to it), which
	// forgetting the timeline must delete.
	key    leaseKey
	at     time.Time
	index  int
	stored bool
}

type timeline = TimelineDoc

// Gap is a time without a confirmed holder: after a release or an
// expiry, until the next tenure (End zero: still vacant).
type Gap struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	Seconds float64   `json:"seconds"`
	// After is the holder before the gap, Cause "released", "expired" or
	// "deleted".
	After string `json:"after,omitempty"`
	Cause string `json:"cause"`
}

// TimelineView is a lease's timeline as the detail page draws it.
type TimelineView struct {
	// Since is when the server began keeping this timeline; nothing before
	// it is known but the acquireTime of the holder then.
	Since   time.Time    `json:"since"`
	Now     time.Time    `json:"now"`
	Tenures []TenureView `json:"tenures"`
	Gaps    []Gap        `json:"gaps"`
	// Persisted reports that the timeline survives a restart.
	Persisted bool `json:"persisted"`
}

// TenureView is a Tenure with its expiry, if it expired.
type TenureView struct {
	Tenure
	// ExpiredAt is LastRenew + duration when that came before End (or
	// before now, for the current tenure).
	ExpiredAt time.Time `json:"expiredAt,omitzero"`
}

func (tn *Tenure) expiry() time.Time {
	return tn.LastRenew.Add(time.Duration(tn.DurationSeconds) * time.Second)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func renewTimeOf(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	if l.Spec.AcquireTime != nil {
		return l.Spec.AcquireTime.Time
	}
	return time.Time{}
}

// observeTimelineLocked records one observed state of lease k in its
// timeline; live is false for a lease found by a list, changed reports a
// holder other than the one last seen (or a lease not seen before).
func (t *holderTracker) observeTimelineLocked(k leaseKey, l *coordinationv1.Lease, now time.Time, live, changed bool) {
	tl := t.timelines[k]
	listed := false
	if tl == nil {
		if holderOf(l) == "" {
			return // nothing to tell yet
		}
		if live && !changed {
			// A renewal (or another update) of a lease whose timeline is
			// not kept, as past maxHolderHistories leases: making one
			// here evicted the least recently active timeline for nearly
			// every renewal of the fleet, a save and a delete in the
			// store each, and its tenure would have begun at a renewal.
			// The lease gets a timeline when it next changes hands.
			return
		}
		if len(t.timelines) >= maxHolderHistories {
			if !live && (t.byActivity[0].stored || listedActivity(l, now).Before(t.byActivity[0].at)) {
				// Less recently active than every timeline kept: it
				// would be the next one evicted. A list of a fleet past
				// maxHolderHistories leases made and evicted (and
				// deleted from the store) a timeline for nearly each.
				// Nor does a list evict a stored timeline: at every
				// start that cost a delete, and the history the page
				// showed before it, for a lease that merely renewed
				// later than another.
				return
			}
			t.evictTimelineLocked()
		}
		tl = &timeline{Since: now}
		t.keepTimelineLocked(k.owned(), tl)
		listed = !live
	}
	// The timeline's own key, not the decoded lease's strings, goes into
	// the maps of what to save.
	t.advanceTimelineLocked(tl.key, tl, l, now, live)
	if listed && !tl.stored && t.urgent[tl.key] {
		// Made from a list, it holds only what the lease itself says
		// (acquireTime, renewTime), which the next list finds again: it
		// is saved with its next change of hands or at shutdown.
		delete(t.urgent, tl.key)
		t.lazy[tl.key] = true
	}
	if at := tl.lastActivity(); !at.Equal(tl.at) {
		tl.at = at
		heap.Fix(&t.byActivity, tl.index)
	}
}

// listedActivity is the last activity (lastActivity) of the timeline a
// list's lease l would start at now: its tenure's last renewal, as
// advanceTimelineLocked sets it for a lease found by a list.
func listedActivity(l *coordinationv1.Lease, now time.Time) time.Time {
	start := now
	if l.Spec.AcquireTime != nil && l.Spec.AcquireTime.Time.Before(now) {
		start = l.Spec.AcquireTime.Time
	}
	if renew := renewTimeOf(l); !renew.IsZero() && renew.Before(now) && renew.After(start) {
		return renew
	}
	return start
}

// advanceTimelineLocked records one observed state of lease k in its
// timeline tl.
func (t *holderTracker) advanceTimelineLocked(k leaseKey, tl *timeline, l *coordinationv1.Lease, now time.Time, live bool) {
	holder := clipped(holderOf(l))
	dur := derefInt32(l.Spec.LeaseDurationSeconds)
	renew := renewTimeOf(l)
	var cur *Tenure
	if n := len(tl.Tenures); n > 0 && tl.Tenures[n-1].End.IsZero() {
		cur = &tl.Tenures[n-1]
	}
	if cur != nil && cur.Holder == holder {
		t.renewedLocked(k, tl, cur, l, now, renew, dur, live)
		return
	}
	if cur == nil && holder == "" {
		return
	}
	if cur != nil {
		cause := "changed"
		if holder == "" {
			cause = "released"
		}
		end := now
		if !live && l.Spec.AcquireTime != nil && l.Spec.AcquireTime.Time.After(cur.Start) {
			// Changed while the server was not watching: the new
			// holder's acquireTime is the best guess.
			end = earlier(l.Spec.AcquireTime.Time, now)
		}
		t.endLocked(cur, end, cause)
	}
	if holder != "" {
		start, last := now, now
		if !live {
			// Found by a list: the lease says since when it is held.
			if l.Spec.AcquireTime != nil && l.Spec.AcquireTime.Time.Before(now) {
				start = l.Spec.AcquireTime.Time
			}
			if !renew.IsZero() && renew.Before(now) && renew.After(start) {
				last = renew
			} else {
				last = start
			}
		}
		tl.Tenures = append(tl.Tenures, Tenure{Holder: clip(holderOf(l)), Start: start, LastRenew: last,
			DurationSeconds: dur, live: live, renewSeen: renew})
		t.trimLocked(tl, now)
	}
	t.urgent[k] = true
}

// renewedLocked handles a state of the current holder: a renewal when
// renewTime moved, a redirect when preferredHolder names another.
func (t *holderTracker) renewedLocked(k leaseKey, tl *timeline, cur *Tenure, l *coordinationv1.Lease, now, renew time.Time, dur int32, live bool) {
	if p := l.Spec.PreferredHolder; p != nil && *p != "" && *p != holderOf(l) && cur.Renewals == 0 && cur.live && now.Sub(cur.Start) < redirectWindow {
		cur.redirected = true
	}
	if renew.Equal(cur.renewSeen) {
		return // another field changed
	}
	cur.renewSeen = renew
	at := now
	if !live {
		// Seen again by a list (a restart, or a relist): the renewals in
		// between were not seen; the lease's renewTime tells the last.
		at = renew
		if at.IsZero() || at.After(now) {
			at = now
		}
		if l.Spec.AcquireTime != nil && l.Spec.AcquireTime.Time.After(cur.expiry()) && !cur.expiry().Before(cur.Start) {
			// It expired and was taken again by the same holder.
			t.endLocked(cur, cur.expiry(), "expired")
			start := earlier(l.Spec.AcquireTime.Time, now)
			tl.Tenures = append(tl.Tenures, Tenure{Holder: cur.Holder, Start: start, LastRenew: later(start, at), DurationSeconds: dur, renewSeen: renew})
			t.trimLocked(tl, now)
			t.urgent[k] = true
			return
		}
	} else if cur.DurationSeconds > 0 && now.After(cur.expiry().Add(expirySlack)) {
		// The holder renewed after its lease had expired: a gap.
		t.endLocked(cur, cur.expiry(), "expired")
		// The renewal that starts it is the holder's own act.
		tl.Tenures = append(tl.Tenures, Tenure{Holder: cur.Holder, Start: now, LastRenew: now, Renewals: 1, DurationSeconds: dur, live: true, renewSeen: renew})
		t.trimLocked(tl, now)
		t.urgent[k] = true
		return
	}
	if at.After(cur.LastRenew) {
		cur.LastRenew = at
	}
	cur.Renewals++
	cur.DurationSeconds = dur
	t.lazy[k] = true
}

func (t *holderTracker) endLocked(cur *Tenure, at time.Time, cause string) {
	cur.End, cur.Ended = at, cause
	if cur.live && cur.Renewals == 0 && (cur.redirected || at.Sub(cur.Start) < redirectWindow) && cause != "expired" {
		cur.Unconfirmed = true
	}
}

// trimLocked drops tenures beyond the bounds, oldest first.
func (t *holderTracker) trimLocked(tl *timeline, now time.Time) {
	drop := 0
	for drop < len(tl.Tenures)-1 && !tl.Tenures[drop].End.IsZero() && now.Sub(tl.Tenures[drop].End) > timelineSpan {
		drop++
	}
	drop = max(drop, len(tl.Tenures)-maxTenures)
	if drop > 0 {
		tl.Tenures = append(tl.Tenures[:0:0], tl.Tenures[drop:]...)
	}
}

// lastActivity is when a timeline last changed, for eviction.
func (tl *timeline) lastActivity() time.Time {
	if n := len(tl.Tenures); n > 0 {
		last := &tl.Tenures[n-1]
		return later(last.LastRenew, last.End)
	}
	return tl.Since
}

// activityHeap orders the kept timelines by last activity, least recent
// first: evicting one, and following a renewal, is O(log n), where a scan
// of all of them on every renewal of a lease without a timeline cost a
// fleet past maxHolderHistories leases a few percent of a core.
type activityHeap []*timeline

func (h activityHeap) Len() int           { return len(h) }
func (h activityHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h activityHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *activityHeap) Push(x any) {
	tl := x.(*timeline)
	tl.index = len(*h)
	*h = append(*h, tl)
}
func (h *activityHeap) Pop() any {
	old := *h
	n := len(old) - 1
	tl := old[n]
	old[n] = nil
	*h = old[:n]
	tl.index = -1
	return tl
}

// keepTimelineLocked starts keeping tl as lease k's timeline.
func (t *holderTracker) keepTimelineLocked(k leaseKey, tl *timeline) {
	if t.gone[k] {
		// A stored document of an earlier timeline of the lease waits to
		// be deleted: saving this one replaces it instead.
		delete(t.gone, k)
		tl.stored = true
		t.urgent[k] = true
	}
	tl.key, tl.at = k, tl.lastActivity()
	t.timelines[k] = tl
	heap.Push(&t.byActivity, tl)
}

// evictTimelineLocked forgets the least recently active timeline.
func (t *holderTracker) evictTimelineLocked() {
	if len(t.byActivity) > 0 {
		t.forgetTimelineLocked(t.byActivity[0].key)
	}
}

func (t *holderTracker) forgetTimelineLocked(k leaseKey) {
	tl, ok := t.timelines[k]
	if !ok {
		return
	}
	heap.Remove(&t.byActivity, tl.index)
	delete(t.timelines, k)
	delete(t.urgent, k)
	delete(t.lazy, k)
	if tl.stored {
		// One never saved costs the store nothing: a burst of new leases
		// evicts timelines before the flush that would have saved them.
		t.gone[k] = true
	}
}

// view renders lease k's timeline at now: tenures with their expiries,
// and the gaps between confirmed tenures.
func (t *holderTracker) view(ns, name string) (TimelineView, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() {
		return TimelineView{}, false
	}
	now := t.now()
	out := TimelineView{Since: t.since, Now: now, Tenures: []TenureView{}, Gaps: []Gap{}, Persisted: t.store != nil}
	tl := t.timelines[leaseKey{ns, name}]
	if tl == nil {
		return out, true
	}
	out.Since = tl.Since
	var prevEnd time.Time
	var prevHolder, prevCause string
	for _, tn := range tl.Tenures {
		v := TenureView{Tenure: tn}
		end := tn.End
		if end.IsZero() {
			end = now
		}
		if tn.Ended == "expired" || (tn.DurationSeconds > 0 && tn.expiry().Before(end)) {
			v.ExpiredAt = tn.expiry()
		}
		out.Tenures = append(out.Tenures, v)
		if tn.Unconfirmed {
			continue
		}
		if !prevEnd.IsZero() && tn.Start.Sub(prevEnd) >= minGap {
			out.Gaps = append(out.Gaps, Gap{Start: prevEnd, End: tn.Start, Seconds: tn.Start.Sub(prevEnd).Seconds(), After: prevHolder, Cause: prevCause})
		}
		prevEnd, prevHolder, prevCause = end, tn.Holder, tn.Ended
		if !v.ExpiredAt.IsZero() {
			prevEnd, prevCause = v.ExpiredAt, "expired"
		}
		if tn.End.IsZero() && v.ExpiredAt.IsZero() {
			prevEnd = time.Time{} // held now: no trailing gap
		}
	}
	if !prevEnd.IsZero() && now.Sub(prevEnd) >= minGap {
		out.Gaps = append(out.Gaps, Gap{Start: prevEnd, Seconds: now.Sub(prevEnd).Seconds(), After: prevHolder, Cause: prevCause})
	}
	return out, true
}

// Transitions is the body of the transitions endpoint: per lease, how
// many times it changed hands in each bucket of the last day, oldest
// bucket first; leases that did not change hands are left out.
type Transitions struct {
	Now           time.Time        `json:"now"`
	BucketSeconds int              `json:"bucketSeconds"`
	Leases        map[string][]int `json:"leases"`
}

const (
	sparkBuckets = 24
	sparkBucket  = time.Hour
)

func (t *holderTracker) transitions() Transitions {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := Transitions{Now: now, BucketSeconds: int(sparkBucket / time.Second), Leases: map[string][]int{}}
	from := now.Add(-sparkBuckets * sparkBucket)
	for k, tl := range t.timelines {
		var counts []int
		prev := ""
		for _, tn := range tl.Tenures {
			// A change of hands is a confirmed tenure after another
			// holder's (not the same one's, back after an expiry).
			if tn.Unconfirmed {
				continue
			}
			changed := prev != "" && prev != tn.Holder
			prev = tn.Holder
			if !changed || !tn.Start.After(from) {
				continue
			}
			if counts == nil {
				counts = make([]int, sparkBuckets)
			}
			b := min(int(tn.Start.Sub(from)/sparkBucket), sparkBuckets-1)
			counts[b]++
		}
		if counts != nil {
			out.Leases[k.namespace+"/"+k.name] = counts
		}
	}
	return out
}

// load reads the stored timelines, before the first list.
func (t *holderTracker) load(ctx context.Context, log *slog.Logger) {
	if t.store == nil {
		return
	}
	docs, err := t.store.Timelines(ctx)
	if err != nil {
		log.Warn("The UI cannot read the stored lease timelines; starting without", "err", err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var found []*timeline
	for nn, doc := range docs {
		tl := &timeline{key: leaseKey{nn.Namespace, nn.Name}, stored: true}
		if err := json.Unmarshal(doc, tl); err != nil {
			log.Warn("Discarding an undecodable lease timeline", "namespace", nn.Namespace, "lease", nn.Name, "err", err)
			t.gone[tl.key] = true
			continue
		}
		found = append(found, tl)
	}
	// The most recently active ones are kept; the store drops the others
	// (they would only be read again, in their place, at a later start).
	slices.SortFunc(found, func(a, b *timeline) int { return b.lastActivity().Compare(a.lastActivity()) })
	for _, tl := range found {
		if len(t.timelines) >= maxHolderHistories {
			t.gone[tl.key] = true
			continue
		}
		if n := len(tl.Tenures); n > maxTenures {
			tl.Tenures = tl.Tenures[n-maxTenures:]
		}
		for i := range tl.Tenures {
			tl.Tenures[i].Holder = clip(tl.Tenures[i].Holder)
			// Not seen since the restart: the next observation compares
			// the lease's own renewTime.
			tl.Tenures[i].renewSeen = tl.Tenures[i].LastRenew
		}
		t.keepTimelineLocked(tl.key, tl)
	}
}

// flush writes the timelines that changed hands (with all, at shutdown,
// also those only renewed since) and deletes the stored ones forgotten.
func (t *holderTracker) flush(ctx context.Context, all bool, log *slog.Logger) {
	if t.store == nil {
		return
	}
	type doc struct {
		k    leaseKey
		body []byte
	}
	var docs []doc
	var gone []leaseKey
	t.mu.Lock()
	keys := make([]leaseKey, 0, len(t.urgent))
	for k := range t.urgent {
		keys = append(keys, k)
	}
	if all {
		for k := range t.lazy {
			if !t.urgent[k] {
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		delete(t.urgent, k)
		delete(t.lazy, k)
		if tl := t.timelines[k]; tl != nil {
			if b, err := json.Marshal(tl); err == nil {
				docs = append(docs, doc{k, b})
				// From now on (even should the write fail) forgetting
				// it deletes the document, in a later flush than this
				// one's write.
				tl.stored = true
			}
		}
	}
	for k := range t.gone {
		gone = append(gone, k)
	}
	// Fresh maps, not emptied ones: a Go map keeps the table it grew to,
	// and a burst of new leases (each new timeline evicts one) grew these
	// to thousands of entries that an idle server then kept for good.
	if len(gone) > 0 {
		t.gone = map[leaseKey]bool{}
	}
	if len(t.urgent) == 0 && len(keys) > 0 {
		t.urgent = map[leaseKey]bool{}
	}
	if len(t.lazy) == 0 && all && len(keys) > 0 {
		t.lazy = map[leaseKey]bool{}
	}
	t.mu.Unlock()
	// A few at a time: the store commits the writes that arrive together
	// in one transaction (bbolt's writer, raft's batches), where one after
	// another each cost a commit of its own, a sync and at least 16 KiB
	// on the device (512 at shutdown). The saves end before the deletes
	// begin (a key is in one of them only: see keepTimelineLocked).
	inParallel(len(docs), func(i int) {
		d := docs[i]
		if err := t.store.SaveTimeline(ctx, d.k.namespace, d.k.name, d.body); err != nil {
			log.Debug("Saving a lease timeline failed", "namespace", d.k.namespace, "lease", d.k.name, "err", err)
		}
	})
	inParallel(len(gone), func(i int) {
		k := gone[i]
		if err := t.store.DeleteTimeline(ctx, k.namespace, k.name); err != nil {
			log.Debug("Deleting a lease timeline failed", "namespace", k.namespace, "lease", k.name, "err", err)
		}
	})
}

// flushWorkers is how many timeline writes a flush has in flight.
const flushWorkers = 16

// inParallel runs f(0) … f(n-1) on up to flushWorkers goroutines and
// returns when all have.
func inParallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, flushWorkers) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

// flushLoop saves the timelines that changed hands until ctx is done,
// then all that changed.
func (t *holderTracker) flushLoop(ctx context.Context, log *slog.Logger) {
	if t.store == nil {
		return
	}
	tick := time.NewTicker(flushUrgent)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The store may be closing too: best effort, briefly.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			t.flush(fctx, true, log)
			cancel()
			return
		case <-tick.C:
			t.flush(ctx, false, log)
		}
	}
}
