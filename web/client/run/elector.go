package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/web/client/lease"
)

// outcome is the result of one acquire-or-renew attempt.
type outcome int

const (
	notLeader  outcome = iota // not (or not yet) holding; try again later
	leading                   // the write succeeded: we hold the lease
	steppedOut                // preferredHolder asks us to hand over
	displaced                 // someone else holds the lease we thought ours
	drainedOut                // an operator drained our identity (leasehold drain)
)

func (o outcome) String() string {
	return [...]string{"not leader", "leading", "asked to step down", "displaced", "identity drained by an operator"}[o]
}

// term describes our current tenure, handed to the child as its fencing
// context.
type term struct {
	Transitions int32
	AcquireTime time.Time
	// UID is the lease object's: a copy with another uid is another
	// lease of the same name.
	UID types.UID
	// NotBefore is when the child may start: after a forced release, once
	// the previous holder's lease would have run out (turnFence).
	NotBefore time.Time
}

// elector is client-go's LeaderElector reduced to its lease logic
// (tryAcquireOrRenew, tryCoordinatedRenew, release). It is not safe for
// concurrent use: the runner has at most one attempt in flight.
type elector struct {
	c           *lease.Client
	ns, name    string
	id          string
	seconds     int32 // leaseDurationSeconds we write
	coordinated bool
	fence       *turnFence
	log         *slog.Logger

	lease        *coordinationv1.Lease // last copy received from the server
	observedSpec []byte
	// observedTime is when (on our monotonic clock) the spec last changed.
	// Expiry of another holder is judged from it only, never from the
	// server's renewTime, so that clock offsets between devices do not
	// matter (client-go's rule).
	observedTime time.Time
	holding      bool
	term         term
	// drained is whether the server last said our identity is drained
	// (checkDrain).
	drained bool
}

// checkDrain asks the server whether our identity is drained (leasehold
// drain; the server keeps drains per namespace and identity). A plain
// elector checks before every attempt: drained, it neither campaigns nor
// renews, and a holder steps down. Not knowing (the server unreachable, a
// user not allowed to read drains) keeps the last answer: the lease's own
// write decides then.
func (e *elector) checkDrain(ctx context.Context) bool {
	d, err := e.c.GetDrain(ctx, e.ns, e.id)
	switch {
	case err == nil:
		if !e.drained {
			e.log.Warn("This identity is drained: not campaigning until it is undrained",
				"drained_by", d.By, "drained_at", d.Time.Format(time.RFC3339), "via", d.Via)
		}
		e.drained = true
	case lease.IsNotFound(err):
		if e.drained {
			e.log.Info("This identity was undrained: campaigning again")
		}
		e.drained = false
	default:
		e.log.Debug("Cannot read this identity's drain", "err", err)
	}
	return e.drained
}

func (e *elector) observe(l *coordinationv1.Lease) {
	e.fence.observe(l)
	b, _ := json.Marshal(l.Spec)
	if !bytes.Equal(b, e.observedSpec) {
		e.observedSpec, e.observedTime = b, time.Now()
	}
	e.lease = l
}

// expired reports whether the holder of the observed lease has had its
// full leaseDurationSeconds since we last saw the lease change.
func (e *elector) expired(l *coordinationv1.Lease) bool {
	d := time.Duration(deref(l.Spec.LeaseDurationSeconds)) * time.Second
	return time.Since(e.observedTime) > d
}

// resign forgets leadership; the next attempt starts a new term.
func (e *elector) resign() { e.holding = false }

// try makes one acquire-or-renew attempt. sent is the moment, on our
// monotonic clock, the successful write was sent: every other party saw the
// renewal later than that, so sent + lease duration bounds their patience.
func (e *elector) try(ctx context.Context) (out outcome, sent time.Time, err error) {
	if e.coordinated {
		return e.tryCoordinated(ctx)
	}
	if e.checkDrain(ctx) {
		if e.holding {
			return drainedOut, time.Time{}, nil
		}
		return notLeader, time.Time{}, nil
	}
	// 1. Fast path: renew from the copy we hold, without a GET.
	if e.holding && e.lease != nil && !e.expired(e.lease) {
		l := e.lease.DeepCopy()
		sent = time.Now()
		e.fill(l, sent, true)
		if got, err := e.c.UpdateLease(ctx, l); err == nil {
			e.observe(got)
			return leading, sent, nil
		} else if ctx.Err() != nil {
			return notLeader, time.Time{}, err
		} else {
			e.log.Debug("Fast-path renew failed; reading the lease", "err", err)
		}
	}
	// 2. Read the lease; create it when missing.
	cur, err := e.c.GetLease(ctx, e.ns, e.name)
	if lease.IsNotFound(err) {
		e.fence.observeGone()
		if e.holding {
			return displaced, time.Time{}, nil
		}
		sent = time.Now()
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.name}}
		e.fill(l, sent, false)
		zero := int32(0)
		l.Spec.LeaseTransitions = &zero
		got, err := e.c.CreateLease(ctx, l)
		if err != nil {
			return notLeader, time.Time{}, fmt.Errorf("create lease: %w", err)
		}
		e.observe(got)
		e.startTerm(got, sent)
		return leading, sent, nil
	}
	if err != nil {
		return notLeader, time.Time{}, fmt.Errorf("get lease: %w", err)
	}
	e.observe(cur)
	holder := deref(cur.Spec.HolderIdentity)
	// 3. Is it someone else's, or are we asked to step down?
	if e.holding && holder != e.id {
		return displaced, time.Time{}, nil
	}
	if e.holding && stepDownFor(cur) == e.id {
		return steppedOut, time.Time{}, nil
	}
	if holder != "" && holder != e.id && !e.expired(cur) {
		return notLeader, time.Time{}, nil
	}
	// A preferredHolder (set by an operator or a coordinator) asks the
	// holder to hand over; a free lease waits one of our lease durations
	// (not the record's: a release writes 1 s) for the preferred identity
	// before anyone else may take it.
	if pref := deref(cur.Spec.PreferredHolder); pref != "" && pref != e.id {
		if e.holding {
			return steppedOut, time.Time{}, nil
		}
		if time.Since(e.observedTime) < time.Duration(e.seconds)*time.Second {
			return notLeader, time.Time{}, nil
		}
	}
	// 4. Take or renew it, conditional on the resourceVersion we read.
	l := cur.DeepCopy()
	sent = time.Now()
	e.fill(l, sent, e.holding)
	got, err := e.c.UpdateLease(ctx, l)
	if lease.IsConflict(err) {
		return notLeader, time.Time{}, nil // lost the race
	}
	if err != nil {
		return notLeader, time.Time{}, fmt.Errorf("update lease: %w", err)
	}
	e.observe(got)
	if !e.holding {
		e.startTerm(got, sent)
	}
	return leading, sent, nil
}

// fill writes our record into l, as LeaderElectionRecordToLeaseSpec does.
// A new term (keepTerm false) gets acquireTime now and leaseTransitions+1,
// also when the lease still names us from an earlier term: the child's
// fencing token must change whenever a new child may start.
func (e *elector) fill(l *coordinationv1.Lease, now time.Time, keepTerm bool) {
	s := &l.Spec
	id, secs, t := e.id, e.seconds, metav1.NewMicroTime(now)
	s.HolderIdentity, s.LeaseDurationSeconds, s.RenewTime = &id, &secs, &t
	if !keepTerm {
		at := t
		n := deref(s.LeaseTransitions) + 1
		s.AcquireTime, s.LeaseTransitions = &at, &n
		delete(l.Annotations, AnnotationStepDown) // meant for an earlier holder
	}
	s.PreferredHolder = nil
	s.Strategy = nil // a plain elector writes no strategy, as client-go's
}

func (e *elector) startTerm(l *coordinationv1.Lease, now time.Time) {
	e.holding = true
	e.term = term{Transitions: deref(l.Spec.LeaseTransitions), AcquireTime: now, UID: l.UID, NotBefore: e.fence.notBefore()}
	if l.Spec.AcquireTime != nil {
		e.term.AcquireTime = l.Spec.AcquireTime.Time
	}
}

// tryCoordinated is client-go's tryCoordinatedRenew: the lease is only
// ever granted by the server's election controller; we renew it while it
// names us and carries no preferredHolder.
func (e *elector) tryCoordinated(ctx context.Context) (outcome, time.Time, error) {
	cur, err := e.c.GetLease(ctx, e.ns, e.name)
	if lease.IsNotFound(err) {
		e.fence.observeGone()
		if e.holding {
			return displaced, time.Time{}, nil
		}
		return notLeader, time.Time{}, nil // the coordinator creates it
	}
	if err != nil {
		return notLeader, time.Time{}, fmt.Errorf("get lease: %w", err)
	}
	e.observe(cur)
	if deref(cur.Spec.HolderIdentity) != e.id {
		if e.holding {
			return displaced, time.Time{}, nil
		}
		return notLeader, time.Time{}, nil
	}
	if e.expired(cur) {
		// Left for the coordinator to re-grant (that write changes the
		// record and so restarts our observation).
		return notLeader, time.Time{}, nil
	}
	if deref(cur.Spec.PreferredHolder) != "" || (e.holding && stepDownFor(cur) == e.id) {
		// Any value, even our own name, ends the term (client-go).
		if e.holding {
			return steppedOut, time.Time{}, nil
		}
		return notLeader, time.Time{}, nil
	}
	l := cur.DeepCopy()
	sent := time.Now()
	id, secs, t := e.id, e.seconds, metav1.NewMicroTime(sent)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &secs, &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t // an upstream coordinator leaves it unset
	}
	l.Spec.PreferredHolder = nil
	if !e.holding {
		// A new term: a step-down request left over from an earlier one
		// (its release failed) is not meant for it.
		delete(l.Annotations, AnnotationStepDown)
	}
	got, err := e.c.UpdateLease(ctx, l)
	if lease.IsConflict(err) {
		return notLeader, time.Time{}, nil
	}
	if err != nil {
		return notLeader, time.Time{}, fmt.Errorf("update lease: %w", err)
	}
	e.observe(got)
	if !e.holding {
		e.startTerm(got, sent)
	}
	return leading, sent, nil
}

// release hands the lease back (holderIdentity "", leaseDurationSeconds
// 1) if it still names us, as client-go's ReleaseOnCancel does, retrying
// lost races. Callers must have stopped the child first.
func (e *elector) release(ctx context.Context) error {
	e.holding = false
	for attempt := 0; ; attempt++ {
		cur, err := e.c.GetLease(ctx, e.ns, e.name)
		if lease.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release: get lease: %w", err)
		}
		if deref(cur.Spec.HolderIdentity) != e.id {
			return nil // not ours (any more)
		}
		l := cur.DeepCopy()
		empty, one, t := "", int32(1), metav1.NewMicroTime(time.Now())
		at := t
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &empty, &one
		l.Spec.AcquireTime, l.Spec.RenewTime = &at, &t
		delete(l.Annotations, AnnotationStepDown) // done
		if e.coordinated {
			// As client-go: the coordinator re-decides on a free lease.
			l.Spec.PreferredHolder = nil
		} else if pref := deref(l.Spec.PreferredHolder); pref == "" || pref == e.id {
			l.Spec.PreferredHolder, l.Spec.Strategy = nil, nil
		}
		// Otherwise preferredHolder (and the strategy validation demands
		// with it) is kept, so that the identity we stepped down for gets
		// its turn before the other standbys (see try).
		got, err := e.c.UpdateLease(ctx, l)
		if err == nil {
			e.observe(got)
			return nil
		}
		if !lease.IsConflict(err) || attempt >= 4 {
			return fmt.Errorf("release: update lease: %w", err)
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
