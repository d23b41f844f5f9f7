package ui

import (
	"context"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unique"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/listwatch"
)

// The bounds of the holder history. A plain Lease (no LeaseCandidates) has
// no decision history: its clients elect themselves, and the object keeps
// only the current holder. So the server watches Leases and remembers the
// last few holder changes of each, which the page cannot learn on its own
// when it opens after them. Memory stays bounded: at most
// maxHolderHistories leases × maxHolderChanges changes, with identities
// clipped to maxIdentityBytes (worst case about 3 MiB, typically tens of
// KiB), plus the current holder of every lease (one short string each, a
// fraction of the lease the engine itself keeps in memory).
const (
	maxHolderChanges   = 10
	maxHolderHistories = 512
	maxIdentityBytes   = 253
)

// HolderChange is one change of a Lease's spec.holderIdentity that the
// server saw in the watch stream. From or To is empty when the lease had
// no holder (created without one, or released).
type HolderChange struct {
	// Time is when the server saw the change (its clock).
	Time time.Time `json:"time"`
	From string    `json:"from"`
	To   string    `json:"to"`
	// Transitions is spec.leaseTransitions after the change.
	Transitions int32 `json:"transitions"`
}

// HolderHistory is the recent holder changes of one Lease, oldest first.
// Since is when the server started watching: changes before it are
// unknown.
type HolderHistory struct {
	Since time.Time      `json:"since"`
	Items []HolderChange `json:"items"`
}

type leaseKey struct{ namespace, name string }

// owned returns k with strings of its own: the tracker keeps a key per
// lease for as long as the lease exists, and one made of a decoded
// lease's strings pinned them among the rest of that object's memory,
// which the start-up list of every lease left strewn over pages the
// runtime could then not return. The namespace is interned: a fleet's
// leases share a few.
func (k leaseKey) owned() leaseKey {
	return leaseKey{unique.Make(k.namespace).Value(), strings.Clone(k.name)}
}

// holderTracker keeps the current holder of every lease and the recent
// changes of the most recently changed ones.
type holderTracker struct {
	mu    sync.Mutex
	since time.Time // zero until the first list succeeded
	// current is the holder of every lease, by the lease's key hashed
	// with seed (currentKey): a key of its own per lease (two strings,
	// their copies and a slot twice the size) was about half of the
	// tracker's memory with 10,000 leases. Two leases of one 64-bit hash
	// under a seed drawn at start (a chance of about 1 in 10^11 with
	// 10,000 leases) would share an entry: a holder change could then be
	// missed or misattributed in the UI's history, nothing more.
	current map[uint64]string
	seed    maphash.Seed
	changes map[leaseKey][]HolderChange
	now     func() time.Time

	// The timelines (timeline.go), and which to save at the next flush
	// (a new tenure), at shutdown (renewals only) or delete (stored ones
	// forgotten); store is nil when they are kept in memory only.
	timelines  map[leaseKey]*timeline
	byActivity activityHeap
	urgent     map[leaseKey]bool
	lazy       map[leaseKey]bool
	gone       map[leaseKey]bool
	store      TimelineStore
}

func newHolderTracker() *holderTracker {
	return &holderTracker{current: map[uint64]string{}, seed: maphash.MakeSeed(), changes: map[leaseKey][]HolderChange{}, now: time.Now,
		timelines: map[leaseKey]*timeline{}, urgent: map[leaseKey]bool{}, lazy: map[leaseKey]bool{}, gone: map[leaseKey]bool{}}
}

// currentKey is k's key in t.current.
func (t *holderTracker) currentKey(k leaseKey) uint64 { return maphash.Comparable(t.seed, k) }

// history returns the changes of one lease; ok is false until the tracker
// has listed the leases once (or when it does not run).
func (t *holderTracker) history(namespace, name string) (HolderHistory, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() {
		return HolderHistory{}, false
	}
	items := append([]HolderChange{}, t.changes[leaseKey{namespace, name}]...)
	return HolderHistory{Since: t.since, Items: items}, true
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// clip bounds an identity's size and copies it: watch objects are shared
// with other watchers and must not be pinned by a long-lived string.
func clip(s string) string {
	if len(s) > maxIdentityBytes {
		s = s[:maxIdentityBytes] + "…"
	}
	return strings.Clone(s)
}

// observe records the state of one lease. live reports that the lease
// was seen changing (a watch event), not found by a list: a lease first
// seen by a list has no known previous holder.
func (t *holderTracker) observe(l *coordinationv1.Lease, live bool) {
	k := leaseKey{l.Namespace, l.Name}
	holder := holderOf(l)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	ck := t.currentKey(k)
	prev, known := t.current[ck]
	unchanged := known && prev == clipped(holder)
	t.observeTimelineLocked(k, l, now, live, !unchanged)
	if unchanged {
		return
	}
	holder = clip(holder)
	t.current[ck] = holder
	if !known && (!live || holder == "") {
		return // no previous holder known, or no change (created vacant)
	}
	c := HolderChange{Time: now, From: prev, To: holder, Transitions: derefInt32(l.Spec.LeaseTransitions)}
	list := t.changes[k]
	if list == nil {
		if len(t.changes) >= maxHolderHistories {
			t.evictOldestLocked()
		}
		k = k.owned()
	}
	if len(list) >= maxHolderChanges {
		list = append(list[:0:0], list[len(list)-maxHolderChanges+1:]...)
	}
	t.changes[k] = append(list, c)
}

// clipped is what clip would store, without copying: the comparison on
// every renewal must not allocate.
func clipped(s string) string {
	if len(s) > maxIdentityBytes {
		return s[:maxIdentityBytes] + "…"
	}
	return s
}

// evictOldestLocked forgets the history whose last change is the oldest.
func (t *holderTracker) evictOldestLocked() {
	var oldest leaseKey
	var at time.Time
	first := true
	for k, list := range t.changes {
		if last := list[len(list)-1].Time; first || last.Before(at) {
			oldest, at, first = k, last, false
		}
	}
	delete(t.changes, oldest)
}

func (t *holderTracker) forget(l *coordinationv1.Lease) {
	k := leaseKey{l.Namespace, l.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.current, t.currentKey(k))
	delete(t.changes, k)
	t.forgetTimelineLocked(k)
}

// replace applies a full list: changes that happened while the watch was
// down are recorded (at the time of the list), vanished leases forgotten.
func (t *holderTracker) replace(items []coordinationv1.Lease) {
	t.mu.Lock()
	listed := make(map[uint64]bool, len(items))
	for i := range items {
		listed[t.currentKey(leaseKey{items[i].Namespace, items[i].Name})] = true
	}
	for ck := range t.current {
		if !listed[ck] {
			delete(t.current, ck)
		}
	}
	for k := range t.changes {
		if !listed[t.currentKey(k)] {
			delete(t.changes, k)
		}
	}
	for k := range t.timelines {
		if !listed[t.currentKey(k)] { // stored ones of leases deleted while down, too
			t.forgetTimelineLocked(k)
		}
	}
	first := t.since.IsZero()
	if first {
		t.since = t.now()
	}
	// The leases with a timeline are seen first: a timeline loaded from
	// the store has the last activity it was saved with (renewals are not
	// saved), and seen after the other leases it would have been evicted
	// for one of them, at a delete and a save, on every start of a
	// server with more than maxHolderHistories leases.
	kept := make([]bool, len(items))
	for i := range items {
		_, kept[i] = t.timelines[leaseKey{items[i].Namespace, items[i].Name}]
	}
	t.mu.Unlock()
	for _, pass := range []bool{true, false} {
		for i := range items {
			if kept[i] == pass {
				t.observe(&items[i], !first)
			}
		}
	}
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// run lists then watches Leases in all namespaces until ctx is done
// (engine/listwatch: relisting when the watch's history is gone, resuming
// from the last resourceVersion when it merely ends). Timelines are kept
// in store too, when it is not nil.
func (t *holderTracker) run(ctx context.Context, eng engine.API, store TimelineStore, log *slog.Logger) {
	res, ok := eng.ResourceFor(engine.GroupName, "v1", "leases")
	if !ok {
		log.Warn("The UI cannot keep holder histories: the engine serves no leases v1")
		return
	}
	scope := engine.Scope{Resource: res, Version: "v1", UserAgent: "leasehold-ui"}
	if store != nil {
		t.mu.Lock()
		t.store = store
		t.mu.Unlock()
		t.load(ctx, log)
		flushed := make(chan struct{})
		flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
		go func() { defer close(flushed); t.flushLoop(flushCtx, log) }()
		// The final flush runs after the watch stopped observing.
		defer func() { stopFlush(); <-flushed }()
	}
	listwatch.Run(ctx, listwatch.Options[*coordinationv1.LeaseList, *coordinationv1.Lease]{
		Engine: eng, Scope: scope,
		// Nothing here writes to an event's object, and observe copies
		// what it keeps: take the shared ones.
		SharedObjects: true,
		Replace:       func(l *coordinationv1.LeaseList) { t.replace(l.Items) },
		Apply: func(typ watch.EventType, l *coordinationv1.Lease) {
			if typ == watch.Deleted {
				t.forget(l)
				return
			}
			t.observe(l, true)
		},
		OnError: func(err error) { log.Debug("The UI's lease watch failed; retrying", "err", err) },
	})
}
