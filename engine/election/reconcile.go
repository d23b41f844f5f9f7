package election

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
)

// retryAfterWriteError is how soon a decision is retried after a failed
// write; a conflict is retried at once with the refreshed object.
const retryAfterWriteError = time.Second

// snapshot copies what the controller knows about one lease.
func (c *Controller) snapshot(k leaseKey) (le *leaseEntry, cands []*candEntry, drained map[string]history.DrainRecord, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.leases[k]; e != nil {
		cp := *e
		le = &cp
	}
	for _, e := range c.cands[k] {
		cp := *e
		cands = append(cands, &cp)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].obj.Name < cands[j].obj.Name })
	return le, cands, c.drainsOfLocked(k.ns), c.deleted[k]
}

// reconcile makes one decision on lease k and returns when to look again
// (zero: only on the next event). Every step is recomputed from the caches
// plus the controller's liveness memory, so the result does not depend on
// list order or on how often it runs.
func (c *Controller) reconcile(ctx context.Context, k leaseKey) (again time.Time) {
	if !c.learnLease(ctx, k) {
		// Not knowing whether the lease exists, decide nothing yet.
		return c.now().Add(retryAfterWriteError)
	}
	now := c.now()
	le, all, drained, deleted := c.snapshot(k)
	if le == nil && len(all) == 0 {
		c.forget(ctx, k, deleted)
		return time.Time{}
	}
	var next time.Time
	var valid []*candEntry
	for _, e := range all {
		if c.valid(e, now) {
			valid = append(valid, e)
			next = earliest(next, e.renewAt.Add(c.opts.CandidateValidity+time.Millisecond))
		}
	}
	lv := viewLease(le, now)
	why := unservedWhy{}
	for _, e := range all {
		if !c.valid(e, now) {
			why[e.obj.Name] = c.invalidReason(e)
		}
	}
	if len(valid) == 0 {
		c.withoutValidCandidates(ctx, k, lv, all, why, now)
		return next
	}
	m := c.memoFor(ctx, k)
	strategy, conflict := resolveStrategy(valid)
	var (
		dec     decision
		trigger abi.Reason
	)
	defer func() {
		// Judged after the decision's pings, on the cache as it is now.
		again = earliest(again, c.noteUnresponsive(ctx, k, m, why, dec, valid, lv, strategy))
	}()
	if conflict != "" {
		m.last = nil
		if m.incident("conflict", conflict) {
			c.stats.conflicts.Add(1)
			c.log.Warn("Not electing: conflicting strategies", "lease", k.String(), "detail", conflict)
			r := c.newRecord(m, now, lv.trigger(), "", lv, valid, nil)
			r.Action, r.Reason, r.Outcome = "conflict", conflict, "ok"
			c.record(ctx, k, m, r)
		}
		return next
	}
	m.resolved("conflict")
	// Read before the lookup: a reload between the two then makes the
	// decision count as older than its Resync, never the reverse.
	resyncs := c.resyncs.Load()
	s, found := c.lookup(strategy)
	if found == strategyPending {
		// Its module may be among those still loading: left alone, and
		// decided by the Resync at the end of the load (nothing recorded:
		// waiting a few seconds at start is not an incident).
		m.last = nil
		return next
	}
	if found == strategyMissing {
		m.last = nil
		for _, e := range valid {
			if string(e.obj.Spec.Strategy) == strategy {
				why[e.obj.Name] = "no strategy module implements its strategy " + strategy
			}
		}
		if m.incident("unknown", strategy) {
			c.stats.abstentions.Add(1)
			c.log.Warn("Not electing: no module implements the candidates' strategy", "lease", k.String(), "strategy", strategy)
			r := c.newRecord(m, now, lv.trigger(), strategy, lv, valid, nil)
			r.Action, r.Reason, r.Outcome = "abstain", "no module loaded for strategy "+strategy, "ok"
			c.record(ctx, k, m, r)
		}
		return next
	}
	m.resolved("unknown")
	if m.candidatesSince.IsZero() {
		m.candidatesSince = now
	}
	if lv.live {
		next = earliest(next, lv.expiry)
	} else {
		forRound(valid, lv.roundStart())
	}

	byName := make(map[string]*candEntry, len(valid))
	for _, e := range valid {
		byName[e.obj.Name] = e
	}
	// Progress is judged as the drains will be enforced: without the
	// drained candidates, in the ranking and among those that answered.
	eligible := valid
	if len(drained) > 0 {
		eligible = nil
		for _, e := range valid {
			if _, ok := drained[e.obj.Name]; !ok {
				eligible = append(eligible, e)
			}
		}
	}
	progress := func(d *abi.Decision) error {
		cp := *d
		cp.Ranking, _ = withoutDrained(d.Ranking, drained)
		return c.stalls(&cp, lv, eligible, byName, now)
	}
	dec, trigger = c.decideOrReuse(ctx, k, m, s, strategy, lv, valid, drained, resyncs, now, progress)
	act := &action{c: c, k: k, m: m, now: now, lv: lv, valid: valid, byName: byName,
		strategy: strategy, dec: dec, trigger: trigger}
	act.applyDrains(drained)
	return earliest(next, act.run(ctx))
}

// withoutValidCandidates is reconcile's answer to a lease none of whose
// candidates (if any) is valid: a stale preferredHolder goes, the lease is
// noted as unserved when it has candidates, and a lease with none left is
// plain again and forgotten.
func (c *Controller) withoutValidCandidates(ctx context.Context, k leaseKey, lv leaseView, all []*candEntry, why unservedWhy, now time.Time) {
	if len(all) > 0 || lv.preferred != "" {
		c.clearStalePreferred(ctx, k, lv, nil)
	}
	if len(all) > 0 {
		m := c.memoFor(ctx, k)
		m.candidatesSince = time.Time{}
		c.noteUnserved(ctx, k, m, why, all, lv, "", now)
	} else {
		c.mu.Lock()
		if m := c.memos[k]; m != nil {
			m.candidatesSince = time.Time{}
		}
		c.mu.Unlock()
	}
	if len(all) == 0 && c.dropPlain(k) {
		// A plain lease now: the cache stops following it, and the
		// memory of it goes (its decision history stays with it).
		c.forget(ctx, k, false)
	}
}

// noteFailure logs and records a fallback decision once per incident of
// the lease's strategy module failing (each try after a backoff window
// that fails again continues the same incident), and ends the incident
// when the module answered.
func (c *Controller) noteFailure(ctx context.Context, k leaseKey, m *memo, s abi.Strategy, strategy string,
	lv leaseView, valid []*candEntry, trigger abi.Reason, dec decision, now time.Time) {
	if !dec.fallback {
		m.resolved("failure")
		return
	}
	if !m.incident("failure", moduleString(s.Module())) {
		return
	}
	c.log.Error("Election strategy failed; deciding with the fallback, without preemption",
		"lease", k.String(), "strategy", strategy, "module", moduleString(s.Module()), "err", dec.failure)
	r := c.newRecord(m, now, trigger, strategy, lv, valid, &dec)
	r.Action, r.Reason, r.Outcome = "strategy-error", fmt.Sprintf("%s: %v", moduleString(s.Module()), dec.failure), "ok"
	c.record(ctx, k, m, r)
}

// action carries one decision through to its writes.
type action struct {
	c        *Controller
	k        leaseKey
	m        *memo
	now      time.Time
	lv       leaseView
	valid    []*candEntry
	byName   map[string]*candEntry
	strategy string
	dec      decision
	trigger  abi.Reason

	// What is done with dec once the drains are enforced (applyDrains):
	// the ranking without drained candidates, the action and whether a
	// live holder may be asked to step down.
	ranking   []string
	act       abi.Action
	preempt   bool
	drained   map[string]history.DrainRecord
	drainNote string
	// holderDrain is the live holder's drain record, nil unless drained.
	holderDrain *history.DrainRecord
}

func (a *action) run(ctx context.Context) time.Time {
	d := a.dec.d
	switch a.act {
	case abi.ActionAbstain:
		if a.m.incident("abstain", a.strategy+": "+d.Reason) {
			a.c.stats.abstentions.Add(1)
			a.c.log.Info("Strategy abstained; leaving the lease alone", "lease", a.k.String(), "strategy", a.strategy, "reason", d.Reason)
			a.recordAction(ctx, "abstain", "", nil)
		}
		return time.Time{}
	case abi.ActionKeep:
		a.m.resolved("abstain")
		if a.lv.preferred != "" {
			a.clearPreferred(ctx, "strategy keeps the holder: "+d.Reason)
		}
		if !a.lv.live {
			a.c.ping(ctx, a.k, a.c.unrankedIdle(a.ranking, a.undrained(), a.now))
			if a.m.incident("nocandidate", "keep: "+d.Reason) {
				a.recordAction(ctx, "no-candidate", "", nil)
			}
		}
		return time.Time{}
	}
	a.m.resolved("abstain")
	if !a.lv.live {
		return a.elect(ctx)
	}
	return a.handOver(ctx)
}

// elect grants a vacant (missing, free or expired) lease to the best
// candidate that answered. A fallback decision may grant: nobody leads.
func (a *action) elect(ctx context.Context) time.Time {
	c := a.c
	p := c.planFor(a.ranking, a.byName, len(a.ranking), c.opts.GrantAckWait, a.now, true)
	c.ping(ctx, a.k, p.toPing)
	if a.m.candidatesSince.After(a.lv.roundStart()) {
		// The candidates appeared on a lease already vacant (or missing):
		// the grant waits for a ping round from when the first of them was
		// seen, so that the best of candidates starting together gets it,
		// not the first to register. A lease that falls vacant under
		// candidates known before goes to the best that answers at once.
		if until := a.m.candidatesSince.Add(c.opts.FirstGrantWait); a.now.Before(until) {
			return until
		}
	}
	switch {
	case p.target != "":
		a.m.resolved("nocandidate")
		err := c.grant(ctx, a.k, a.lv, p.target, a.strategy, a.dec, a.now)
		if err == nil {
			c.stats.grants.Add(1)
			c.log.Info("Granted lease", "lease", a.k.String(), "holder", p.target, "previous", a.lv.holder,
				"trigger", a.trigger, "strategy", a.dec.strategy, "fallback", a.dec.fallback)
		}
		a.recordAction(ctx, "grant", p.target, err)
		return retryAfter(err, a.now)
	case p.blocked:
		return p.waitUntil
	}
	// No ranked candidate answered in time: find out whether one the
	// ranking left out is alive (see progress.go).
	c.ping(ctx, a.k, c.unrankedIdle(a.ranking, a.undrained(), a.now))
	if a.m.incident("nocandidate", "none acked") {
		c.log.Warn("No live candidate to grant the lease to", "lease", a.k.String(), "ranked", len(a.ranking))
		a.recordAction(ctx, "no-candidate", "", nil)
	}
	return p.retryAt
}

// handOver deals with a live lease: it asks the holder to step down for a
// better candidate that answered (preferredHolder), or removes a
// preferredHolder that is stale or no longer better.
func (a *action) handOver(ctx context.Context) time.Time {
	c := a.c
	a.m.resolved("nocandidate")
	if a.lv.unconfirmed && (!a.dec.fallback || a.holderDrain != nil) {
		if next, done := a.move(ctx); done {
			return next
		}
	}
	// A lease without strategy is renewed by a plain (uncoordinated)
	// elector, which ignores preferredHolder and clears it on every renew:
	// asking would only start upstream's write ping-pong.
	allow := a.preempt && a.lv.strategy != ""
	if !allow {
		c.clearStalePreferred(ctx, a.k, a.lv, a.byName)
		return time.Time{}
	}
	limit := len(a.ranking)
	if i := slices.Index(a.ranking, a.lv.holder); i >= 0 {
		limit = i
	}
	p := c.planFor(a.ranking, a.byName, limit, c.opts.PingWindow, a.now, false)
	c.ping(ctx, a.k, p.toPing)
	switch {
	case p.target != "" && p.target != a.lv.preferred:
		err := c.setPreferred(ctx, a.k, a.lv, p.target, a.strategy)
		if err == nil {
			c.stats.preemptions.Add(1)
			c.log.Info("Asked the lease holder to step down", "lease", a.k.String(), "holder", a.lv.holder,
				"preferredHolder", p.target, "strategy", a.dec.strategy)
		}
		a.recordAction(ctx, "prefer", p.target, err)
		return retryAfter(err, a.now)
	case p.target != "":
		return time.Time{}
	case p.blocked:
		switch {
		case a.lv.preferred != "" && a.byName[a.lv.preferred] == nil:
			a.clearPreferred(ctx, "preferred holder "+a.lv.preferred+" is no longer a candidate")
		case a.isDrained(a.lv.preferred):
			a.clearPreferred(ctx, "preferred holder "+a.lv.preferred+" is drained")
		}
		return p.waitUntil
	}
	if a.lv.preferred != "" {
		a.clearPreferred(ctx, "no live candidate is better than the holder")
	}
	a.stepDownDrained(ctx)
	return p.retryAt
}

// move gives a grant its holder has not confirmed to a better candidate
// at once, instead of asking the holder to step down and waiting for the
// lease to expire: nobody leads it yet. The write is a compare-and-swap
// on the resourceVersion the controller saw, so if the holder's
// confirming renewal lands first the move fails with a conflict (and the
// holder, confirmed, is asked to step down as any holder); if the move
// lands first the holder's renewal fails and it never leads. A fallback
// decision never moves (it never preempts either). done is false when
// nobody better answered: then the lease is handled as any live one.
func (a *action) move(ctx context.Context) (next time.Time, done bool) {
	c := a.c
	limit := len(a.ranking)
	if i := slices.Index(a.ranking, a.lv.holder); i >= 0 {
		limit = i
	}
	p := c.planFor(a.ranking, a.byName, limit, c.opts.GrantAckWait, a.now, true)
	c.ping(ctx, a.k, p.toPing)
	switch {
	case p.target != "":
		if c.beforeMove != nil {
			c.beforeMove()
		}
		err := c.grant(ctx, a.k, a.lv, p.target, a.strategy, a.dec, a.now)
		if err == nil {
			c.stats.grants.Add(1)
			c.stats.moves.Add(1)
			c.log.Info("Moved an unconfirmed grant", "lease", a.k.String(), "holder", p.target, "previous", a.lv.holder,
				"trigger", a.trigger, "strategy", a.dec.strategy)
		}
		r := c.newRecord(a.m, a.now, a.trigger, a.strategy, a.lv, a.valid, &a.dec)
		r.Action, r.Chosen, r.Outcome = "grant", p.target, outcome(err)
		r.Reason = "moved the grant " + a.lv.holder + " had not confirmed yet: " +
			c.choiceReason(a.ranking, p.target, a.byName, a.now) + a.drainSuffix() + "; strategy: " + r.Reason
		if err != nil {
			c.log.Info("Moving an unconfirmed grant failed; the holder may have confirmed it", "lease", a.k.String(),
				"holder", a.lv.holder, "target", p.target, "err", err)
		}
		c.record(ctx, a.k, a.m, r)
		return retryAfter(err, a.now), true
	case p.blocked:
		// A better candidate may still answer; meanwhile the holder may
		// confirm, and then a hand-over is the way.
		return p.waitUntil, true
	}
	return time.Time{}, false
}

// drainSuffix says in a record's reason what the drains changed.
func (a *action) drainSuffix() string {
	if a.drainNote == "" {
		return ""
	}
	return " (" + a.drainNote + ")"
}

func (a *action) clearPreferred(ctx context.Context, why string) {
	err := a.c.clearPreferred(ctx, a.k, a.lv)
	if err == nil {
		a.c.stats.cleared.Add(1)
		a.c.log.Info("Cleared preferredHolder", "lease", a.k.String(), "preferredHolder", a.lv.preferred, "reason", why)
	}
	r := a.c.newRecord(a.m, a.now, a.trigger, a.strategy, a.lv, a.valid, &a.dec)
	r.Action, r.Reason, r.Outcome = "clear-preferred", why, outcome(err)
	a.c.record(ctx, a.k, a.m, r)
}

func (a *action) recordAction(ctx context.Context, what, chosen string, err error) {
	r := a.c.newRecord(a.m, a.now, a.trigger, a.strategy, a.lv, a.valid, &a.dec)
	r.Action, r.Chosen, r.Outcome = what, chosen, outcome(err)
	if chosen != "" {
		r.Reason = a.c.choiceReason(a.ranking, chosen, a.byName, a.now) + a.drainSuffix() + "; strategy: " + r.Reason
	}
	if err != nil {
		a.c.log.Warn("Election write failed", "lease", a.k.String(), "action", what, "err", err)
	}
	a.c.record(ctx, a.k, a.m, r)
}

// clearStalePreferred removes a preferredHolder that names no valid
// candidate, on a lease whose strategy this controller implements (a
// stale one makes the holder step down for nobody: kubernetes#138066).
func (c *Controller) clearStalePreferred(ctx context.Context, k leaseKey, lv leaseView, valid map[string]*candEntry) {
	if !lv.exists || lv.preferred == "" || valid[lv.preferred] != nil {
		return
	}
	if _, ok := c.opts.Registry.Lookup(lv.strategy); !ok {
		return
	}
	m := c.memoFor(ctx, k)
	err := c.clearPreferred(ctx, k, lv)
	if err == nil {
		c.stats.cleared.Add(1)
		c.log.Info("Cleared stale preferredHolder", "lease", k.String(), "preferredHolder", lv.preferred)
	}
	r := c.newRecord(m, c.now(), lv.trigger(), lv.strategy, lv, nil, nil)
	r.Action, r.Reason, r.Outcome = "clear-preferred", "preferred holder "+lv.preferred+" is no longer a valid candidate", outcome(err)
	c.record(ctx, k, m, r)
}

// forget drops the memory of a lease that has neither object nor
// candidates any more, and its decision history if the lease was deleted.
func (c *Controller) forget(ctx context.Context, k leaseKey, deleted bool) {
	c.mu.Lock()
	delete(c.memos, k)
	delete(c.deleted, k)
	delete(c.due, k)
	c.mu.Unlock()
	c.backoff.forget(k)
	if deleted {
		if err := c.h.DeleteDecisions(ctx, k.ns, k.name); err != nil {
			c.log.Warn("Deleting decision history failed", "lease", k.String(), "err", err)
		}
	}
}

func outcome(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// retryAfter is the next look after a write: none on success (the write's
// result re-queues the lease), a second later after an error (a conflict
// refreshes the cache, which re-queues the lease at once anyway).
func retryAfter(err error, now time.Time) time.Time {
	if err == nil {
		return time.Time{}
	}
	return now.Add(retryAfterWriteError)
}
