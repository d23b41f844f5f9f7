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
// and nothing is decided from the watch alone.
func (r *runner) watchForTurn(ctx context.Context, wake chan<- struct{}) {
	for ctx.Err() == nil {
		r.followLease(ctx, wake)
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.RetryPeriod):
		}
	}
}

// followLease lists the lease and watches it from the list's
// resourceVersion until the stream ends.
func (r *runner) followLease(ctx context.Context, wake chan<- struct{}) {
	c, ns, name := r.el.c, r.el.ns, r.el.name
	lm, err := c.GetLeaseForWatch(ctx, ns, name)
	if err != nil {
		return
	}
	if lm.Object != nil && r.ourTurn(lm.Object) {
		notify(wake)
	}
	w, err := c.WatchLease(ctx, ns, name, lm.ResourceVersion, 300)
	if err != nil {
		return
	}
	defer w.Close()
	stop := context.AfterFunc(ctx, func() { _ = w.Close() })
	defer stop()
	for {
		ev, err := w.Next()
		if err != nil {
			return
		}
		if ev.Object != nil && ev.Type != lease.Bookmark && r.ourTurn(ev.Object) {
			notify(wake)
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
