package election

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// grant gives a free, expired or missing lease to target, or moves a
// grant its holder has not confirmed (lv.unconfirmed) to target. Unlike
// upstream it maintains acquireTime and leaseTransitions (as client-go's
// plain election does: +1 whenever the holder changes on an existing
// lease, a move included: the grant it replaces may have re-granted the
// lease to the holder of the term before, and a fencing token must grow
// from that term to the next) and it re-grants an expired lease to the same holder, which un-sticks a
// client-go elector that judged the lease expired. It marks the grant
// unconfirmed (AnnotationGrantedRenewTime) until the holder renews.
func (c *Controller) grant(ctx context.Context, k leaseKey, lv leaseView, target, strategy string, dec decision, now time.Time) error {
	var l *coordinationv1.Lease
	if lv.exists {
		l = lv.obj.DeepCopy()
	} else {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: k.name}}
	}
	// Microseconds, as stored and served: the mark compares equal to
	// what the holder reads back. renewTime is written from the wall
	// clock, as every client does; nobody judges expiry from it (the
	// controller and client-go count from when they saw it change).
	t := metav1.NewMicroTime(c.wall().Truncate(time.Microsecond))
	dur := c.opts.grantSeconds()
	s := &l.Spec
	prev := derefStr(s.HolderIdentity)
	s.HolderIdentity = &target
	s.LeaseDurationSeconds = &dur
	s.RenewTime = &t
	if prev != target || s.AcquireTime == nil {
		at := t
		s.AcquireTime = &at
	}
	switch {
	case !lv.exists:
		zero := int32(0)
		s.LeaseTransitions = &zero
	case prev != target:
		n := derefI32(s.LeaseTransitions) + 1
		s.LeaseTransitions = &n
	}
	s.PreferredHolder = nil
	st := coordinationv1.CoordinatedLeaseStrategy(strategy)
	s.Strategy = &st
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationStrategy] = dec.strategy
	l.Annotations[AnnotationModule] = moduleString(dec.module)
	l.Annotations[AnnotationReason] = truncate(dec.d.Reason, maxAnnotationReason)
	l.Annotations[AnnotationGrantedRenewTime] = microRFC3339(t.Time)
	if dec.fallback {
		l.Annotations[AnnotationFallbackFrom] = strategy
	} else {
		delete(l.Annotations, AnnotationFallbackFrom)
	}
	return c.writeLease(ctx, k, l, !lv.exists)
}

// setPreferred asks the live holder to step down for target. It never
// touches holderIdentity: a live lease is only ever handed over by its
// holder releasing it or letting it expire.
func (c *Controller) setPreferred(ctx context.Context, k leaseKey, lv leaseView, target, strategy string) error {
	return c.updateTerm(ctx, k, lv, func(l *coordinationv1.Lease) {
		l.Spec.PreferredHolder = &target
		if l.Spec.Strategy == nil || *l.Spec.Strategy == "" {
			st := coordinationv1.CoordinatedLeaseStrategy(strategy)
			l.Spec.Strategy = &st
		}
	})
}

// clearPreferred removes a stale or obsolete preferredHolder (upstream
// leaves it, and the lease stalls: kubernetes#138066).
func (c *Controller) clearPreferred(ctx context.Context, k leaseKey, lv leaseView) error {
	return c.updateTerm(ctx, k, lv, func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = nil })
}

// termWriteTries bounds updateTerm's writes.
const termWriteTries = 3

// updateTerm writes change to a live lease without changing its holder.
// The write is at the cached resourceVersion, and the holder renews
// meanwhile: one that renews more often than a reconcile takes (a busy
// device) would win every compare-and-swap, and the hand-over would never
// be written. A renewal changes nothing the decision depends on, so on a
// conflict the change is applied again at once to the lease as re-read,
// while that is still the term decided on (same object, holder,
// preferredHolder, strategy, acquireTime and transitions); any other
// change goes back to a fresh decision, as before.
func (c *Controller) updateTerm(ctx context.Context, k leaseKey, lv leaseView, change func(*coordinationv1.Lease)) error {
	l := lv.obj.DeepCopy()
	for try := 1; ; try++ {
		change(l)
		err := c.writeLease(ctx, k, l, false)
		if err == nil || !apierrors.IsConflict(err) || try == termWriteTries {
			return err
		}
		sc := c.leaseScope
		sc.Namespace = k.ns
		o, gerr := c.e.Get(ctx, sc, k.name, &metav1.GetOptions{})
		cur, ok := o.(*coordinationv1.Lease)
		if gerr != nil || !ok || !sameTerm(cur, lv.obj) {
			return err
		}
		l = cur.DeepCopy()
	}
}

// sameTerm reports whether b is a as its holder renewed it, at most.
func sameTerm(a, b *coordinationv1.Lease) bool {
	as, bs := &a.Spec, &b.Spec
	return a.UID == b.UID && derefStr(as.HolderIdentity) == derefStr(bs.HolderIdentity) &&
		derefStr(as.PreferredHolder) == derefStr(bs.PreferredHolder) &&
		ptrEqual(as.Strategy, bs.Strategy) && microRFC3339OrEmpty(as.AcquireTime) == microRFC3339OrEmpty(bs.AcquireTime) &&
		derefI32(as.LeaseTransitions) == derefI32(bs.LeaseTransitions)
}

// microRFC3339OrEmpty is t as stored (microseconds): a write's result
// may carry the nanoseconds it was written with.
func microRFC3339OrEmpty(t *metav1.MicroTime) string {
	if t == nil {
		return ""
	}
	return microRFC3339(t.Time)
}

func ptrEqual[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// writeLease creates or updates (optimistically, at the cached
// resourceVersion) through the engine and feeds the result to the cache.
// On a conflict it refreshes the cache from the engine, so that the retry
// decides on the current object.
func (c *Controller) writeLease(ctx context.Context, k leaseKey, l *coordinationv1.Lease, create bool) error {
	sc := c.leaseScope
	sc.Namespace = k.ns
	var (
		out any
		err error
	)
	if create {
		out, err = c.e.Create(ctx, sc, l, &metav1.CreateOptions{})
	} else {
		out, _, err = c.e.Update(ctx, sc, k.name, l, &metav1.UpdateOptions{})
	}
	if err != nil {
		c.stats.writeErrors.Add(1)
		gone := !create && apierrors.IsNotFound(err)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			// An update of a deleted lease fails this way too: the UID
			// precondition finds no object.
			cur, gerr := c.e.Get(ctx, sc, k.name, &metav1.GetOptions{})
			if cl, ok := cur.(*coordinationv1.Lease); ok && gerr == nil {
				c.observeLease(cl)
			}
			gone = !create && apierrors.IsNotFound(gerr)
		}
		if gone {
			// The lease was deleted although the cache still had it: an
			// earlier write's result arrived after the deletion's event.
			// Forget the stale copy (unless a newer one came meanwhile) so
			// that the retry decides on a missing lease and creates it,
			// instead of updating a deleted one every second.
			c.forgetLease(l)
		}
		return fmt.Errorf("write lease %s: %w", k, err)
	}
	if ol, ok := out.(*coordinationv1.Lease); ok {
		if create {
			c.observeLease(ol)
		} else {
			c.observeUpdatedLease(ol)
		}
	}
	return nil
}

// observeUpdatedLease feeds an update's result to the cache only if the
// cache still holds that lease (same UID). The result may come back after
// the lease's deletion event: taken as it is, it would bring the deleted
// lease back into the cache and cancel the deletion of its history.
func (c *Controller) observeUpdatedLease(l *coordinationv1.Lease) {
	k := leaseKey{l.Namespace, l.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.leases[k]; old == nil || old.obj.UID != l.UID {
		return
	}
	if _, changed := c.storeLeaseLocked(k, l); changed {
		c.enqueueLocked(k)
		c.signalLocked()
	}
}

// ping writes pingTime on each named candidate, in parallel as upstream
// does since 1.33. pingTime is max(now, renewTime+1µs): client-go acks
// only when pingTime is after its own renewTime, so a candidate whose
// clock runs ahead of ours would otherwise never answer.
func (c *Controller) ping(ctx context.Context, k leaseKey, names []string) {
	var wg sync.WaitGroup
	for _, name := range names {
		c.mu.Lock()
		e := c.cands[k][name]
		var obj *coordinationv1beta1.LeaseCandidate
		if e != nil {
			obj = e.obj.DeepCopy()
		}
		c.mu.Unlock()
		if obj == nil {
			continue
		}
		wg.Go(func() { c.pingOne(ctx, k, obj) })
	}
	wg.Wait()
}

func (c *Controller) pingOne(ctx context.Context, k leaseKey, lc *coordinationv1beta1.LeaseCandidate) {
	// sent (monotonic) opens the ping window; pingTime is wall time.
	sent := c.now()
	pt := c.wall().Truncate(time.Microsecond)
	if r := lc.Spec.RenewTime; r != nil && !pt.After(r.Time) {
		pt = r.Time.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	mt := metav1.NewMicroTime(pt)
	lc.Spec.PingTime = &mt
	sc := c.candScope
	sc.Namespace = lc.Namespace
	out, _, err := c.e.Update(ctx, sc, lc.Name, lc, &metav1.UpdateOptions{})
	if err != nil {
		// A conflict means the candidate changed (usually renewed): the
		// watch brings the news, which is as good as an ack.
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			c.stats.writeErrors.Add(1)
			c.log.Warn("Pinging lease candidate failed", "lease", k.String(), "candidate", lc.Name, "err", err)
		}
		return
	}
	c.stats.pings.Add(1)
	if o, ok := out.(*coordinationv1beta1.LeaseCandidate); ok {
		c.observeCandidate(o, fromWrite)
	}
	c.mu.Lock()
	if e := c.cands[k][lc.Name]; e != nil && e.obj.UID == lc.UID {
		e.pingAt = sent
	}
	c.mu.Unlock()
}
