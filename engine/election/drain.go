package election

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
)

// Drain is leasehold's maintenance mode: an operator takes an identity (a
// device) out of service, as `kubectl cordon` and `kubectl drain` take a
// node. The record is per (namespace, identity) in the store
// (engine/history), so it outlives the LeaseCandidate, whose garbage
// collection and re-creation change nothing. The controller enforces it,
// whatever the strategy answers:
//
//   - a drained candidate is never granted a lease, nor moved an
//     unconfirmed grant, nor made preferredHolder;
//   - a drained holder of a live lease is asked to hand over to the best
//     other ranked candidate that answers (preferredHolder, the graceful
//     path its elector already follows), even when the strategy would keep
//     it or the fallback decided (which otherwise never preempts). A
//     holder drained by force with nobody to hand over to is asked to step
//     down (AnnotationStepDown), which `leasehold run` honours;
//   - strategies see abi.Candidate.Drained, so that they can rank around
//     it, and the progress check judges the ranking without the drained.

// AnnotationDrain on a LeaseCandidate drains (value "true", or "force" to
// drain past the refusal) or undrains ("false", or removing the value
// "true") the candidate's identity: the kubectl way. The web layer turns
// the annotation into a drain record when it serves the write, with the
// user who made it.
const AnnotationDrain = "leasehold.dev/drain"

// AnnotationStepDown asks the holder it names to step down; web/ui and
// web/client/run define the same name (the end-to-end tests hold them
// equal).
const AnnotationStepDown = "leasehold.dev/step-down"

// DrainSource is what the controller needs of the drain records
// (engine/history's Store fits).
type DrainSource interface {
	WatchDrains(ctx context.Context, replace func([]history.DrainRecord), apply func(rec history.DrainRecord, deleted bool))
}

// runDrainInformer keeps c.drained current and re-decides the leases of a
// namespace whose drains changed.
func (c *Controller) runDrainInformer(ctx context.Context) {
	if c.opts.Drains == nil {
		c.drainsSynced.Store(true)
		return
	}
	c.opts.Drains.WatchDrains(ctx, func(recs []history.DrainRecord) {
		c.mu.Lock()
		touched := map[string]bool{}
		for ns := range c.drained {
			touched[ns] = true
		}
		c.drained = map[string]map[string]history.DrainRecord{}
		for _, r := range recs {
			c.setDrainLocked(r)
			touched[r.Namespace] = true
		}
		for ns := range touched {
			c.enqueueNamespaceLocked(ns)
		}
		c.mu.Unlock()
		c.drainsSynced.Store(true)
		c.signal()
	}, func(r history.DrainRecord, deleted bool) {
		c.mu.Lock()
		if deleted {
			delete(c.drained[r.Namespace], r.Identity)
			if len(c.drained[r.Namespace]) == 0 {
				delete(c.drained, r.Namespace)
			}
		} else {
			c.setDrainLocked(r)
		}
		c.enqueueNamespaceLocked(r.Namespace)
		c.mu.Unlock()
		c.signal()
	})
}

func (c *Controller) setDrainLocked(r history.DrainRecord) {
	byID := c.drained[r.Namespace]
	if byID == nil {
		byID = map[string]history.DrainRecord{}
		c.drained[r.Namespace] = byID
	}
	byID[r.Identity] = r
}

// enqueueNamespaceLocked marks every known lease of ns; c.mu is held. A
// drain is rare: re-deciding a namespace costs reused decisions only,
// bar the leases it concerns.
func (c *Controller) enqueueNamespaceLocked(ns string) {
	for k := range c.leases {
		if k.ns == ns {
			c.enqueueLocked(k)
		}
	}
	for k := range c.cands {
		if k.ns == ns {
			c.enqueueLocked(k)
		}
	}
}

// drainsOf copies the drains of namespace ns; c.mu is held.
func (c *Controller) drainsOfLocked(ns string) map[string]history.DrainRecord {
	byID := c.drained[ns]
	if len(byID) == 0 {
		return nil
	}
	out := make(map[string]history.DrainRecord, len(byID))
	for id, r := range byID {
		out[id] = r
	}
	return out
}

// Drained returns the drain record of ns/identity as the controller knows
// it.
func (c *Controller) Drained(ns, identity string) (history.DrainRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.drained[ns][identity]
	return r, ok
}

// withoutDrained returns ranking without the drained names, and those
// names; ranking itself is never changed (it is the strategy's answer, as
// recorded).
func withoutDrained(ranking []string, drained map[string]history.DrainRecord) (kept, out []string) {
	if len(drained) == 0 {
		return ranking, nil
	}
	kept = make([]string, 0, len(ranking))
	for _, name := range ranking {
		if _, ok := drained[name]; ok {
			out = append(out, name)
		} else {
			kept = append(kept, name)
		}
	}
	return kept, out
}

// applyDrains sets what the action does with the strategy's decision once
// the drains are enforced: the ranking without drained candidates, and a
// hand-over (prefer, preempting) when the live holder is drained. A
// strategy that abstains leaves the lease to another controller, drained
// holder or not.
func (a *action) applyDrains(drained map[string]history.DrainRecord) {
	d := a.dec.d
	a.drained = drained
	a.act, a.preempt = d.Action, d.Preempt && !a.dec.fallback
	var out []string
	a.ranking, out = withoutDrained(d.Ranking, drained)
	if len(out) > 0 {
		a.drainNote = "drained, never granted: " + strings.Join(out, ", ")
	}
	rec, ok := drained[a.lv.holder]
	if !ok || !a.lv.live || d.Action == abi.ActionAbstain {
		return
	}
	a.holderDrain = &rec
	a.act, a.preempt = abi.ActionPrefer, true
	a.drainNote = fmt.Sprintf("holder %s is drained (by %s): handing over", a.lv.holder, rec.By)
}

// isDrained reports whether the candidate or holder name is drained.
func (a *action) isDrained(name string) bool {
	_, ok := a.drained[name]
	return ok
}

// stepDownDrained asks a holder drained by force, which nobody can take
// over from, to step down: maintenance was forced past the refusal, so
// the lease goes vacant rather than stay with the drained device. The
// request is written once; `leasehold run` honours it (a client-go
// elector ignores it and keeps the lease until it stops).
func (a *action) stepDownDrained(ctx context.Context) {
	if a.holderDrain == nil || !a.holderDrain.Forced || a.lv.obj.Annotations[AnnotationStepDown] == a.lv.holder {
		return
	}
	holder := a.lv.holder
	err := a.c.updateTerm(ctx, a.k, a.lv, func(l *coordinationv1.Lease) {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationStepDown] = holder
	})
	if err == nil {
		a.c.log.Info("Asked a holder drained by force to step down; no other candidate answers", "lease", a.k.String(), "holder", holder)
	}
	r := a.c.newRecord(a.m, a.now, a.trigger, a.strategy, a.lv, a.valid, &a.dec)
	r.Action, r.Outcome = "step-down", outcome(err)
	r.Reason = fmt.Sprintf("holder %s was drained by force (by %s) and no other candidate answers: asked it to step down", holder, a.holderDrain.By)
	a.c.record(ctx, a.k, a.m, r)
}

// ErrDrainRefused is wrapped by CheckDrain's refusal.
var ErrDrainRefused = errors.New("refusing to drain the only live candidate")

// CheckDrain refuses to drain identity in its namespace when it is the
// only live candidate of a lease (as `kubectl drain` respects disruption
// budgets): cands are the namespace's LeaseCandidates, drained the
// identities drained already. A candidate is live when it renewed within
// validity, and has not ignored a ping for longer than pingWindow
// (judged on the objects, so that any server of a cluster can check,
// whichever runs the controller). The error wraps ErrDrainRefused and
// names the leases.
func CheckDrain(cands []coordinationv1beta1.LeaseCandidate, drained map[string]bool, identity string, now time.Time,
	validity, pingWindow time.Duration) error {
	var mine []string
	live := map[string]int{}
	for i := range cands {
		lc := &cands[i]
		if lc.Name == identity {
			mine = append(mine, lc.Spec.LeaseName)
			continue
		}
		if drained[lc.Name] || !candidateLive(lc, now, validity, pingWindow) {
			continue
		}
		live[lc.Spec.LeaseName]++
	}
	var alone []string
	for _, l := range mine {
		if live[l] == 0 {
			alone = append(alone, l)
		}
	}
	if len(alone) == 0 {
		return nil
	}
	sort.Strings(alone)
	alone = slices.Compact(alone)
	return fmt.Errorf("%w: %s is the only live candidate of lease %s; drain it with force to take the lease out of service",
		ErrDrainRefused, identity, strings.Join(alone, ", "))
}

func candidateLive(lc *coordinationv1beta1.LeaseCandidate, now time.Time, validity, pingWindow time.Duration) bool {
	r := lc.Spec.RenewTime
	if r == nil || now.Sub(r.Time) > validity {
		return false
	}
	p := lc.Spec.PingTime
	ignored := p != nil && p.Time.After(r.Time) && now.Sub(p.Time) > pingWindow
	return !ignored
}

// undrained is the valid candidates without the drained: the ones a
// probe for life may ping (a drained one answering would change nothing).
func (a *action) undrained() []*candEntry {
	if len(a.drained) == 0 {
		return a.valid
	}
	out := make([]*candEntry, 0, len(a.valid))
	for _, e := range a.valid {
		if !a.isDrained(e.obj.Name) {
			out = append(out, e)
		}
	}
	return out
}
