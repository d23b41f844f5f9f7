package election

import (
	"context"
	"math"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Most leases are renewed by plain client-go leader election and have
// nothing to do with coordinated election: caching a copy of each and
// reconciling every renewal would cost heap and CPU per lease for no
// decision at all. So the lease cache holds only the leases coordinated
// election concerns:
//
//   - a lease with spec.strategy or spec.preferredHolder set,
//   - a lease with at least one cached LeaseCandidate,
//   - a cached lease that just stopped being either: it stays until a
//     reconcile has seen the change, then is dropped (dropPlain).
//
// While a lease is cached, every event of it is applied, so the cache is
// as current as the watch. A lease that becomes concerned through its
// first candidate was not followed until then: the worker reads it from
// the engine before deciding (learnLease), as a listed lease (first seen
// now). Events that pass the cache while that read is in flight set a
// floor (fetching): a read result not newer than the floor is stale and
// is not cached, so read and watch resolve by resourceVersion like two
// events do.

// coordinated reports a lease that coordinated election manages whether
// or not it has candidates.
func coordinated(l *coordinationv1.Lease) bool {
	s := &l.Spec
	return s.Strategy != nil && *s.Strategy != "" || s.PreferredHolder != nil && *s.PreferredHolder != ""
}

// concernsLocked reports whether lease l of k belongs in the cache;
// c.mu is held. It must stay cheap: every plain renewal goes through it.
func (c *Controller) concernsLocked(k leaseKey, l *coordinationv1.Lease) bool {
	return c.leases[k] != nil || len(c.cands[k]) > 0 || coordinated(l)
}

// passedLocked notes an event of k that the cache did not take (a plain
// lease, or a deletion) while k's lease is being read, so that an older
// read result is not cached after it; c.mu is held.
func (c *Controller) passedLocked(k leaseKey, l *coordinationv1.Lease) {
	if floor, ok := c.fetching[k]; ok {
		c.fetching[k] = max(floor, rvOf(l))
	}
}

// supersedeReadsLocked discards the reads in flight of leases a relist
// did not cache: the list is the truth then, and whatever happens after
// it comes through the watch that resumes from it; c.mu is held.
func (c *Controller) supersedeReadsLocked(cached map[leaseKey]bool) {
	for k := range c.fetching {
		if !cached[k] {
			c.fetching[k] = math.MaxInt64
		}
	}
}

// learnLease makes the cache know k's lease before a decision, reading
// it from the engine if k's first candidate appeared while the lease was
// not cached. A missing lease is simply not cached: the decision sees no
// lease, and creates it. It reports false if the read failed, and the
// read is then retried with the next reconcile of k.
func (c *Controller) learnLease(ctx context.Context, k leaseKey) bool {
	if !c.startFetch(k) {
		return true
	}
	sc := c.leaseScope
	sc.Namespace = k.ns
	o, err := c.e.Get(ctx, sc, k.name, &metav1.GetOptions{})
	var l *coordinationv1.Lease
	switch {
	case err == nil:
		l, _ = o.(*coordinationv1.Lease)
	case !apierrors.IsNotFound(err):
		c.abortFetch(k)
		if ctx.Err() == nil {
			c.log.Warn("Reading lease failed", "lease", k.String(), "err", err)
		}
		return false
	}
	c.endFetch(k, l)
	return true
}

// startFetch reports whether k's lease must be read, and if so opens the
// read's floor. An event that brought the lease meanwhile, or the last
// candidate leaving, makes the read unnecessary.
func (c *Controller) startFetch(k leaseKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.unfetched[k]; !ok {
		return false
	}
	delete(c.unfetched, k)
	if c.leases[k] != nil || len(c.cands[k]) == 0 {
		return false
	}
	c.fetching[k] = 0
	return true
}

// abortFetch closes a failed read; k's lease is read again next time.
func (c *Controller) abortFetch(k leaseKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.fetching, k)
	c.unfetched[k] = struct{}{}
}

// endFetch caches the lease read for k (nil: not found) unless an event
// not older than it passed during the read. The caller is the worker
// about to decide on k, so a cached result is not enqueued; a discarded
// one is read again if candidates still wait for the lease.
func (c *Controller) endFetch(k leaseKey, l *coordinationv1.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	floor := c.fetching[k]
	delete(c.fetching, k)
	if l == nil {
		return
	}
	if rvOf(l) <= floor {
		if c.leases[k] == nil && len(c.cands[k]) > 0 {
			c.unfetched[k] = struct{}{}
			c.enqueueLocked(k)
			c.signalLocked()
		}
		return
	}
	c.storeLeaseLocked(k, l)
}

// dropPlain removes k's lease from the cache if it no longer concerns
// coordinated election (no strategy, no preferredHolder, no candidate),
// and reports whether it did. The worker calls it after a reconcile saw
// the lease in that state, so the change was acted on once.
func (c *Controller) dropPlain(k leaseKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.leases[k]
	if e == nil || coordinated(e.obj) || len(c.cands[k]) > 0 {
		return false
	}
	delete(c.leases, k)
	return true
}

// leaseExists reports whether k's lease exists in the engine; on a read
// error it answers true, the safe side for whoever wants to delete
// something that refers to the lease.
func (c *Controller) leaseExists(ctx context.Context, k leaseKey) bool {
	sc := c.leaseScope
	sc.Namespace = k.ns
	_, err := c.e.Get(ctx, sc, k.name, &metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// cachedLeases is how many leases the cache holds.
func (c *Controller) cachedLeases() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.leases)
}
