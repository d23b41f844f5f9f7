package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/web/client/lease"
)

// candidateRenew is client-go's LeaseCandidate requeueInterval: a
// candidate renews at least this often even when nobody pings it (the
// watch is reopened, and the candidate renewed, on this period).
const candidateRenew = 5 * time.Minute

// candidate keeps our LeaseCandidate alive, as client-go's NewCandidate
// runner does: create it, renew it every 5 minutes, and ack every ping
// (pingTime after renewTime) at once by writing renewTime.
type candidate struct {
	c                               *lease.Client
	ns, name, lease                 string
	binaryVersion, emulationVersion string
	strategy                        coordinationv1.CoordinatedLeaseStrategy
	log                             *slog.Logger
}

// run keeps the candidate registered until ctx ends.
func (cd *candidate) run(ctx context.Context) {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		err := cd.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			cd.log.Warn("LeaseCandidate watch failed; retrying", "candidate", cd.name, "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
	}
}

// once lists the candidate, creates or renews it, then follows it until the
// watch ends (after candidateRenew at the latest).
func (cd *candidate) once(ctx context.Context) error {
	lm, err := cd.c.GetCandidateForWatch(ctx, cd.ns, cd.name)
	if err != nil {
		return fmt.Errorf("list candidate: %w", err)
	}
	if err := cd.ensure(ctx, lm.Object); err != nil {
		return err
	}
	w, err := cd.c.WatchCandidate(ctx, cd.ns, cd.name, lm.ResourceVersion, int(candidateRenew/time.Second))
	if err != nil {
		return fmt.Errorf("watch candidate: %w", err)
	}
	defer w.Close()
	stop := context.AfterFunc(ctx, func() { w.Close() })
	defer stop()
	for {
		ev, err := w.Next()
		if errors.Is(err, io.EOF) {
			return nil // the server's timeoutSeconds: relist and renew
		}
		if err != nil {
			return fmt.Errorf("watch candidate: %w", err)
		}
		switch ev.Type {
		case lease.Deleted:
			// Someone (a GC, an operator) removed it while we live.
			if err := cd.ensure(ctx, nil); err != nil {
				return err
			}
		case lease.Added, lease.Modified:
			s := ev.Object.Spec
			if s.PingTime != nil && (s.RenewTime == nil || s.RenewTime.Before(s.PingTime)) {
				cd.log.Debug("Acking ping", "candidate", cd.name, "ping_time", s.PingTime.Time)
				if err := cd.ensure(ctx, ev.Object); err != nil {
					return err
				}
			}
		}
	}
}

// ensure creates the candidate (cur nil) or sets its renewTime to now,
// retrying once on a conflict with a fresh copy.
func (cd *candidate) ensure(ctx context.Context, cur *coordinationv1beta1.LeaseCandidate) error {
	for attempt := 0; ; attempt++ {
		var ping *metav1.MicroTime
		if cur != nil {
			ping = cur.Spec.PingTime
		}
		now := renewTimeFor(time.Now(), ping)
		var err error
		if cur == nil {
			lc := &coordinationv1beta1.LeaseCandidate{
				ObjectMeta: metav1.ObjectMeta{Namespace: cd.ns, Name: cd.name},
				Spec: coordinationv1beta1.LeaseCandidateSpec{
					LeaseName:        cd.lease,
					BinaryVersion:    cd.binaryVersion,
					EmulationVersion: cd.emulationVersion,
					Strategy:         cd.strategy,
					RenewTime:        &now,
				},
			}
			if _, err = cd.c.CreateCandidate(ctx, lc); err == nil {
				cd.log.Info("Registered LeaseCandidate", "candidate", cd.name,
					"binary_version", cd.binaryVersion, "emulation_version", cd.emulationVersion, "strategy", cd.strategy)
				return nil
			}
		} else {
			lc := cur.DeepCopy()
			lc.Spec.RenewTime = &now
			if _, err = cd.c.UpdateCandidate(ctx, lc); err == nil {
				return nil
			}
		}
		if attempt >= 2 || !(lease.IsConflict(err) || lease.IsAlreadyExists(err) || lease.IsNotFound(err)) {
			return fmt.Errorf("renew candidate: %w", err)
		}
		// Re-read and try again: a conflict, a concurrent create, or an
		// update of an object deleted meanwhile.
		cur, err = cd.c.GetCandidate(ctx, cd.ns, cd.name)
		if lease.IsNotFound(err) {
			cur = nil
		} else if err != nil {
			return fmt.Errorf("renew candidate: %w", err)
		}
	}
}

// renewTimeFor is the renewTime a renewal writes: now, or just after the
// pending ping when our wall clock reads before it. An ack must be after
// its ping for the coordinator (upstream compares the two) and for our
// own watch, which would otherwise see the ping still pending in the echo
// of our ack and ack again, a write per round trip until our clock
// caught up: a device whose clock NTP just stepped back by minutes, or
// that runs behind the coordinator's. (The election controller writes
// pingTime just after renewTime for the same reason.)
func renewTimeFor(now time.Time, ping *metav1.MicroTime) metav1.MicroTime {
	t := now.Truncate(time.Microsecond)
	if ping != nil && !t.After(ping.Time) {
		t = ping.Time.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return metav1.NewMicroTime(t)
}

// remove deletes the candidate on a clean exit so that the election
// controller stops pinging it at once (client-go leaves it to the
// 30-minute garbage collection).
func (cd *candidate) remove(ctx context.Context) {
	if err := cd.c.DeleteCandidate(ctx, cd.ns, cd.name); err != nil && !lease.IsNotFound(err) {
		cd.log.Warn("Could not delete LeaseCandidate", "candidate", cd.name, "err", err)
	}
}
