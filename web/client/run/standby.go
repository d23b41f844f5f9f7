package run

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/web/client/lease"
)

// watchForTurn follows the lease while the runner stands by and sends on
// wake (without blocking) whenever the lease may now be ours to take: the
// election controller granted it to us, or its holder released it. The
// campaign then tries at once instead of at its next retry period, which
// is what makes the first leader, a hand-over and a release take
// milliseconds instead of up to a retry period. Polling stays the
// fallback: a watch that cannot be opened is retried every retry period,
// and nothing is decided from the watch alone. Every copy seen also feeds
// the fence, so that a forced release is timed from the holder's last
// renewal as soon as it was written, not as the next poll saw it.
func (r *runner) watchForTurn(ctx context.Context, wake chan<- struct{}) {
	r.followLeaseLoop(ctx, func(l *coordinationv1.Lease, deleted bool) {
		if l == nil || deleted {
			r.fence.observeGone()
			if r.cand == nil {
				notify(wake) // ours to create
			}
			return
		}
		r.fence.observe(l)
		if r.ourTurn(l) {
			notify(wake)
		}
	})
}

// termEnd says why the lease watch ended a term.
type termEnd struct {
	reason   string
	stepDown bool // graceful: we were asked to step down
}

// watchTerm follows the lease while we lead and sends on gone once it
// shows the lease no longer ours: released or taken by someone else
// (a forced release), deleted, or asking us to step down. Without it the
// holder would learn of a forced release only at its next renewal, up to a
// retry period later, while a standby may already be starting its child.
func (r *runner) watchTerm(ctx context.Context, t term, gone chan<- termEnd) {
	r.followLeaseLoop(ctx, func(l *coordinationv1.Lease, deleted bool) {
		if end, over := r.termOver(t, l, deleted); over {
			select {
			case gone <- end:
			default:
			}
		}
	})
}

// termOver judges one copy of the lease (nil: absent) seen during term t.
// Copies of our own lease from before the term (a lower leaseTransitions)
// are history, not news.
func (r *runner) termOver(t term, l *coordinationv1.Lease, deleted bool) (termEnd, bool) {
	if l == nil {
		return termEnd{reason: "the lease no longer exists"}, true
	}
	sameObject := t.UID == "" || l.UID == t.UID
	if deleted {
		return termEnd{reason: "the lease was deleted"}, sameObject
	}
	holder := deref(l.Spec.HolderIdentity)
	if holder == r.el.id {
		if stepDownFor(l) == r.el.id {
			return termEnd{reason: "asked to step down (" + AnnotationStepDown + ")", stepDown: true}, true
		}
		return termEnd{}, false
	}
	if sameObject && deref(l.Spec.LeaseTransitions) < t.Transitions {
		return termEnd{}, false
	}
	if holder == "" {
		return termEnd{reason: "the lease was released by someone else"}, true
	}
	return termEnd{reason: "the lease names " + holder}, true
}

// followLeaseLoop runs followLease until ctx ends, a retry period apart.
func (r *runner) followLeaseLoop(ctx context.Context, see func(l *coordinationv1.Lease, deleted bool)) {
	for ctx.Err() == nil {
		followLease(ctx, r.el.c, r.el.ns, r.el.name, see)
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.RetryPeriod):
		}
	}
}

// followLease lists the lease and watches it from the list's
// resourceVersion until the stream ends, handing every copy seen to see:
// nil when the list finds none, the last copy with deleted on a deletion.
func followLease(ctx context.Context, c *lease.Client, ns, name string, see func(l *coordinationv1.Lease, deleted bool)) {
	lm, err := c.GetLeaseForWatch(ctx, ns, name)
	if err != nil {
		return
	}
	see(lm.Object, false)
	w, err := c.WatchLease(ctx, ns, name, lm.ResourceVersion, 300)
	if err != nil {
		return
	}
	defer w.Close()
	stop := context.AfterFunc(ctx, func() { _ = w.Close() })
	defer stop()
	for {
		ev, err := w.Next()
		if err != nil || ctx.Err() != nil {
			return
		}
		switch ev.Type {
		case lease.Added, lease.Modified:
			see(ev.Object, false)
		case lease.Deleted:
			see(ev.Object, true)
		}
	}
}

// ourTurn reports whether l may be ours to take now: granted to us (the
// coordinated controller writes our identity), or free.
func (r *runner) ourTurn(l *coordinationv1.Lease) bool {
	holder := deref(l.Spec.HolderIdentity)
	if r.cand != nil {
		return holder == r.el.id
	}
	return holder == ""
}

func notify(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
