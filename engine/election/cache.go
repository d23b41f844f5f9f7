package election

import (
	"context"
	"errors"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/engine/leasecodec"
	"github.com/leasehold/leasehold/engine/listwatch"
)

var errMissingResources = errors.New("election: engine does not serve leases v1 and leasecandidates v1beta1")

// rvOf parses a resourceVersion (a storage revision); 0 if unparsable.
func rvOf(o metav1.Object) int64 {
	n, _ := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	return n
}

func (c *Controller) runLeaseInformer(ctx context.Context) {
	listwatch.Run(ctx, listwatch.Options[*coordinationv1.LeaseList, *coordinationv1.Lease]{
		Engine: c.e, Scope: c.leaseScope,
		// observeLease copies what it keeps, and nothing here writes to an
		// event's object: take the objects the engine shares.
		SharedObjects: true,
		ListSkip:      c.startLeaseList,
		Replace: func(l *coordinationv1.LeaseList) {
			c.replaceLeases(l.Items)
			c.leasesSynced.Store(true)
			c.signal()
		},
		Apply: func(typ watch.EventType, l *coordinationv1.Lease) {
			if typ == watch.Deleted {
				c.forgetLease(l)
				return
			}
			c.observeLease(l)
		},
		OnError: func(err error) {
			c.log.Warn("Election controller list or watch failed", "resource", "leases", "err", err)
		},
	})
}

func (c *Controller) runCandidateInformer(ctx context.Context) {
	listwatch.Run(ctx, listwatch.Options[*coordinationv1beta1.LeaseCandidateList, *coordinationv1beta1.LeaseCandidate]{
		// observeCandidate keeps the event's object: the watch copies it.
		Engine: c.e, Scope: c.candScope,
		Replace: func(l *coordinationv1beta1.LeaseCandidateList) {
			c.replaceCandidates(l.Items)
			c.candsSynced.Store(true)
			c.signal()
		},
		Apply: func(typ watch.EventType, lc *coordinationv1beta1.LeaseCandidate) {
			if typ == watch.Deleted {
				c.forgetCandidate(lc)
				return
			}
			c.observeCandidate(lc, fromWatch)
		},
		OnError: func(err error) {
			c.log.Warn("Election controller list or watch failed", "resource", "leasecandidates", "err", err)
		},
	})
}

// leaseRecordChanged reports a change of what a holder renews.
func leaseRecordChanged(a, b *coordinationv1.Lease) bool {
	sa, sb := &a.Spec, &b.Spec
	return derefStr(sa.HolderIdentity) != derefStr(sb.HolderIdentity) ||
		!microEqual(sa.RenewTime, sb.RenewTime) ||
		derefI32(sa.LeaseDurationSeconds) != derefI32(sb.LeaseDurationSeconds) ||
		!microEqual(sa.AcquireTime, sb.AcquireTime)
}

// observeLease records a lease seen in an event, a list or a write result
// and reports whether the cache holds the lease now. Stale objects (older
// resourceVersion than cached) are ignored, and so are plain leases (see
// concern.go): for those this is a map lookup or two under the lock, no
// copy and no reconcile.
func (c *Controller) observeLease(l *coordinationv1.Lease) bool {
	k := leaseKey{l.Namespace, l.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, changed := c.storeLeaseLocked(k, l)
	if changed {
		c.enqueueLocked(k)
		c.signalLocked()
	}
	return cached
}

// storeLeaseLocked caches l if it concerns coordinated election and is
// newer than the cached object; c.mu is held. It reports whether k is
// cached afterwards and whether the cached object changed.
func (c *Controller) storeLeaseLocked(k leaseKey, l *coordinationv1.Lease) (cached, changed bool) {
	delete(c.deleted, k)
	old := c.leases[k]
	if old == nil && !c.concernsLocked(k, l) {
		c.passedLocked(k, l)
		return false, false
	}
	if old != nil && rvOf(l) <= rvOf(old.obj) {
		return true, false
	}
	// The cache keeps its own top-level copy: watch events share their
	// objects with other watchers, and a listed lease would pin its list's
	// item array. The copy leaves out managedFields, about a third of a
	// renewed lease's decoded size: the controller never reads them, and
	// an update without them keeps the stored ones (the field manager
	// falls back to the live object's).
	cp := *l
	cp.ManagedFields = nil
	c.stores++
	if old == nil || leaseRecordChanged(old.obj, &cp) {
		c.leases[k] = &leaseEntry{obj: &cp, renewSeen: c.now(), stored: c.stores}
	} else {
		old.obj, old.stored = &cp, c.stores
	}
	return true, true
}

// startLeaseList marks the start of a list of every lease and returns the
// test that leaves out, undecoded, the stored leases the cache would not
// take: plain (no strategy, no preferred holder, read from the stored
// bytes by leasecodec), not cached, without a candidate and not being
// read. At start that is nearly every lease, and decoding them (with
// their managedFields) only to drop them was most of the controller's
// time to ready. A lease that gains a candidate after the test passed it
// is read before any decision (learnLease), as when the candidate comes
// after the list; one cached after the list began is newer than the list
// and is not dropped by it (replaceLeases).
func (c *Controller) startLeaseList() func(stored []byte) bool {
	c.mu.Lock()
	c.listFrom = c.stores
	c.mu.Unlock()
	return func(stored []byte) bool {
		ns, name, coordinated, ok := leasecodec.StoredLeaseCoordination(stored)
		if !ok || coordinated {
			return false
		}
		k := leaseKey{ns, name}
		c.mu.Lock()
		defer c.mu.Unlock()
		_, reading := c.fetching[k]
		return c.leases[k] == nil && len(c.cands[k]) == 0 && !reading
	}
}

// forgetLease records a lease deletion. A lease the cache never held
// and no candidate waits for is none of the controller's business.
func (c *Controller) forgetLease(l *coordinationv1.Lease) {
	k := leaseKey{l.Namespace, l.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.passedLocked(k, l)
	old := c.leases[k]
	if old == nil && len(c.cands[k]) == 0 {
		return
	}
	if old != nil && rvOf(old.obj) > rvOf(l) {
		return
	}
	delete(c.leases, k)
	c.deleted[k] = true
	c.enqueueLocked(k)
	c.signalLocked()
}

func (c *Controller) replaceLeases(items []coordinationv1.Lease) {
	// Only cached leases can vanish from the cache, so only they are
	// remembered: a relist does not build a set of every plain lease.
	seen := map[leaseKey]bool{}
	for i := range items {
		l := &items[i]
		if c.observeLease(l) {
			seen[leaseKey{l.Namespace, l.Name}] = true
		}
	}
	c.mu.Lock()
	for k, e := range c.leases {
		// An entry stored after the list began (a read or a write
		// result) is newer than the list, which may have left it out.
		if !seen[k] && e.stored <= c.listFrom {
			delete(c.leases, k)
			c.deleted[k] = true
			c.enqueueLocked(k)
		}
	}
	c.supersedeReadsLocked(seen)
	c.mu.Unlock()
	c.signal()
}

// signalLocked wakes the worker; it never blocks, so holding c.mu is fine.
func (c *Controller) signalLocked() { c.signal() }

// candSource says where observeCandidate's object comes from.
type candSource int

const (
	// fromList: a listed object only tells when it claims to have renewed.
	fromList candSource = iota
	// fromWatch: an event; a renewal seen now is proof of life.
	fromWatch
	// fromWrite: the result of the controller's own write (a ping). It is
	// as live as an event but may arrive after the candidate's deletion
	// event (the write committed first, its result came back later), so
	// it only refreshes a candidate the cache still holds under the same
	// UID and never adds one: else a deleted candidate would stay cached,
	// counted and pinged, until the next relist.
	fromWrite
)

// observeCandidate records a candidate seen in a list, an event or a
// write result (see candSource).
func (c *Controller) observeCandidate(lc *coordinationv1beta1.LeaseCandidate, src candSource) {
	k := leaseKey{lc.Namespace, lc.Spec.LeaseName}
	now, wall := c.now(), c.wall()
	c.mu.Lock()
	defer c.mu.Unlock()
	byName := c.cands[k]
	old := byName[lc.Name]
	if src == fromWrite && (old == nil || old.obj.UID != lc.UID) {
		return
	}
	if byName == nil {
		byName = map[string]*candEntry{}
		c.cands[k] = byName
		// The lease's events have not been cached so far unless it is
		// coordinated by itself: learn it before deciding (concern.go).
		if c.leases[k] == nil {
			c.unfetched[k] = struct{}{}
		}
	}
	if old != nil && old.obj.UID != lc.UID {
		old = nil // deleted and recreated under the same name
	}
	if old != nil && rvOf(lc) <= rvOf(old.obj) {
		return
	}
	e := &candEntry{obj: lc}
	if old != nil {
		e.renewAt, e.ackAt, e.pingAt, e.createdAt = old.renewAt, old.ackAt, old.pingAt, old.createdAt
	} else {
		e.createdAt = now.Add(-wallAge(lc.CreationTimestamp.Time, wall))
	}
	renewed := old == nil || !microEqual(old.obj.Spec.RenewTime, lc.Spec.RenewTime)
	relevant := renewed || old.obj.Spec.BinaryVersion != lc.Spec.BinaryVersion ||
		old.obj.Spec.EmulationVersion != lc.Spec.EmulationVersion || old.obj.Spec.Strategy != lc.Spec.Strategy
	if renewed {
		switch {
		case lc.Spec.RenewTime == nil:
			e.renewAt, e.ackAt = time.Time{}, time.Time{}
		case src != fromList:
			e.renewAt, e.ackAt = now, now
		default:
			e.renewAt = now.Add(-wallAge(lc.Spec.RenewTime.Time, wall))
		}
	}
	byName[lc.Name] = e
	// A change of pingTime alone is our own ping: it must not trigger
	// another decision (upstream filters it the same way).
	if relevant {
		c.enqueueLocked(k)
		c.signalLocked()
	}
}

func (c *Controller) forgetCandidate(lc *coordinationv1beta1.LeaseCandidate) {
	k := leaseKey{lc.Namespace, lc.Spec.LeaseName}
	c.mu.Lock()
	defer c.mu.Unlock()
	byName := c.cands[k]
	if old := byName[lc.Name]; old != nil && old.obj.UID == lc.UID && rvOf(old.obj) > rvOf(lc) {
		return
	}
	delete(byName, lc.Name)
	if len(byName) == 0 {
		delete(c.cands, k)
	}
	c.enqueueLocked(k)
	c.signalLocked()
}

func (c *Controller) replaceCandidates(items []coordinationv1beta1.LeaseCandidate) {
	type id struct{ ns, name string }
	seen := map[id]bool{}
	for i := range items {
		lc := &items[i]
		seen[id{lc.Namespace, lc.Name}] = true
		c.observeCandidate(lc, fromList)
	}
	c.mu.Lock()
	for k, byName := range c.cands {
		for name := range byName {
			if !seen[id{k.ns, name}] {
				delete(byName, name)
				c.enqueueLocked(k)
			}
		}
		if len(byName) == 0 {
			delete(c.cands, k)
		}
	}
	c.mu.Unlock()
	c.signal()
}

// wallAge is how long ago t was by the wall clock reading wall, at least
// zero: the only place the controller reads a foreign wall time against
// its own, and only to age what a list found (a candidate's renewal or
// creation, for its 30-minute validity), as upstream does. The result
// is converted to a monotonic instant at once, so a later step of the
// wall clock does not change it; a clock that is behind (a device back
// in 1970) makes a listed candidate look fresh, never expired, and it
// still has to answer a ping to be granted anything.
func wallAge(t, wall time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(wall.Sub(t), 0)
}

func derefStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefI32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func microEqual(a, b *metav1.MicroTime) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Time.Equal(b.Time)
}
