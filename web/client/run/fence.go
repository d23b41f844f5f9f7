package run

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// AnnotationStepDown on a Lease asks the holder it names to step down:
// "leasehold run" stops its child, then releases the lease (clearing the
// annotation in the same write) and stands by for one lease duration so
// that another runner takes over. The web UI's "Ask the holder to step
// down" sets it. Holders that do not know it (a client-go elector) ignore
// it; for them only a forced release or a preferredHolder works.
const AnnotationStepDown = "leasehold.dev/step-down"

// stepDownFor is the identity the lease asks to step down, or "".
func stepDownFor(l *coordinationv1.Lease) string {
	return l.Annotations[AnnotationStepDown]
}

// skewMargin is what a standby adds to the previous holder's lease
// duration before starting its child after a forced release: room for the
// two devices' clocks running at different rates over that duration.
func skewMargin(d time.Duration) time.Duration { return d / 10 }

// heldRecord is the latest record held by another identity, and when (on
// our monotonic clock) we first saw it: the holder sent it earlier, so it
// stops its child within its lease duration from then, by its own clock.
type heldRecord struct {
	holder, renew string
	dur           time.Duration
	seen          time.Time
}

// turnFence keeps "one child at a time" when a lease is freed behind its
// holder's back: by an operator's forced release (a patch clearing
// holderIdentity, as the web UI's Force release sends) or by deleting the
// lease. The holder may not have noticed yet (partitioned, or between two
// checks), and it only promises to stop its child within its lease
// duration from its last renewal. So a runner that takes such a lease
// starts its child only after that lease would have run out: the
// renewal's first sighting here + its leaseDurationSeconds + skewMargin,
// all on our monotonic clock. A holder that released the lease itself
// (client-go's release: holderIdentity "" with leaseDurationSeconds 1, and
// renewTime = acquireTime freshly written) has stopped its child first, so
// its release costs no wait.
//
// Records written by us are ignored: our own child is stopped before we
// campaign again. Both the campaign's reads and the standby's watch feed
// the fence, so it is safe for concurrent use.
type turnFence struct {
	me string

	mu      sync.Mutex
	held    heldRecord // zero when none (or it released the lease)
	seenAny bool       // any record or absence observed yet
	until   time.Time  // no child before this; zero when nothing is pending
}

// observe notes one copy of the lease, read or watched.
func (f *turnFence) observe(l *coordinationv1.Lease) {
	now := time.Now()
	s := &l.Spec
	holder := deref(s.HolderIdentity)
	dur := time.Duration(deref(s.LeaseDurationSeconds)) * time.Second
	renew := ""
	if s.RenewTime != nil {
		renew = s.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	first := !f.seenAny
	f.seenAny = true
	switch {
	case holder == f.me:
		// Granted to us by the election controller over a lease we last
		// saw held and unexpired: we missed how it was freed, so assume
		// the worst. (We never take such a lease ourselves.)
		if f.held.holder != "" && now.Before(f.held.seen.Add(f.held.dur)) {
			f.fenceLocked(f.held.seen.Add(f.held.dur + skewMargin(f.held.dur)))
		}
		f.held = heldRecord{}
	case holder != "":
		if f.held.holder != holder || f.held.renew != renew || f.held.dur != dur {
			f.held = heldRecord{holder: holder, renew: renew, dur: dur, seen: now}
		}
	case selfReleased(l, f.held):
		f.held = heldRecord{}
	case f.held.holder != "":
		f.fenceLocked(f.held.seen.Add(f.held.dur + skewMargin(f.held.dur)))
		f.held = heldRecord{}
	case first && s.RenewTime != nil:
		// Freed by force before we ever saw it held: its holder may have
		// renewed just before, and our first sighting is the earliest
		// moment we can count from. (Without a renewTime nobody ever held
		// it: a lease created empty, as with kubectl apply.)
		f.fenceLocked(now.Add(dur + skewMargin(dur)))
	}
}

// observeGone notes that the lease does not exist (read or watched): a
// deletion frees a held lease as a forced release does.
func (f *turnFence) observeGone() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seenAny = true
	if f.held.holder != "" {
		f.fenceLocked(f.held.seen.Add(f.held.dur + skewMargin(f.held.dur)))
		f.held = heldRecord{}
	}
}

func (f *turnFence) fenceLocked(t time.Time) {
	if t.After(f.until) {
		f.until = t
	}
}

// notBefore is the earliest moment a child of ours may start.
func (f *turnFence) notBefore() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until
}

// selfReleased reports whether a free record is its holder's own release,
// as client-go's LeaderElector.release writes it (and so do we):
// leaseDurationSeconds 1, acquireTime and renewTime both set to the time
// of the release, so renewTime differs from the last renewal seen. A patch
// that only clears holderIdentity keeps the holder's duration and
// renewTime.
func selfReleased(l *coordinationv1.Lease, prev heldRecord) bool {
	s := &l.Spec
	if deref(s.HolderIdentity) != "" || deref(s.LeaseDurationSeconds) != 1 || s.RenewTime == nil || s.AcquireTime == nil {
		return false
	}
	if !s.AcquireTime.Equal(s.RenewTime) {
		return false
	}
	return prev.holder == "" || prev.renew != s.RenewTime.UTC().Format(time.RFC3339Nano)
}
