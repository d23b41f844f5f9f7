package election

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An operator's hand-over of a coordinated lease is a preferredHolder
// write, and the election controller re-decides on it at once: a strategy
// that ranks the holder first clears it again ("strategy keeps the
// holder"), one that ranks a third candidate first redirects it, and once
// the holder stepped down the free lease goes to whom the strategy ranks
// first then, which need not be the operator's choice (a coordinated
// holder clears preferredHolder as it releases). The web UI used to say
// "done" all the same. PreviewHandOver answers, before anything is
// written, what the controller would do: the same strategy module, the
// same input (the candidates as the controller sees them, preferredHolder
// set to the choice, the next decision's sequence and seed), the same
// validation, fallback and backoff windows, and the same rules for what a
// decision leads to; it writes nothing, pings nobody, records and counts
// nothing.

// ErrPreviewUnavailable is wrapped by PreviewHandOver's errors: the
// controller cannot tell now (not synced, strategy modules still
// loading, not running), which is not an answer about the lease.
var ErrPreviewUnavailable = errors.New("hand-over preview unavailable")

var errPreviewNotSynced = fmt.Errorf("%w: the election controller has not listed every lease and candidate yet", ErrPreviewUnavailable)

// Outcomes of a hand-over preview.
const (
	// PreviewHandsOver: the candidate stays preferredHolder, the holder
	// steps down and the strategy grants the free lease to the candidate.
	PreviewHandsOver = "hand-over"
	// PreviewKeepsHolder: the controller clears preferredHolder again and
	// the holder keeps the lease.
	PreviewKeepsHolder = "keep-holder"
	// PreviewPrefersOther: the controller sets preferredHolder to another
	// candidate.
	PreviewPrefersOther = "prefer-other"
	// PreviewGrantsOther: the holder steps down, and the free lease goes
	// to another candidate (Chosen; the holder itself, say) or to nobody.
	PreviewGrantsOther = "grant-other"
	// PreviewAbstains: the strategy abstains; the controller leaves the
	// lease alone and nobody can say who gets it.
	PreviewAbstains = "abstain"
	// PreviewNotElected: the controller does not elect on this lease (no
	// valid candidate, conflicting or unknown strategy) or the choice is
	// no valid candidate of it.
	PreviewNotElected = "not-elected"
)

// HandOverPreview is what the election would do if spec.preferredHolder
// of the lease named Candidate now.
type HandOverPreview struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Holder    string `json:"holder"`
	Candidate string `json:"candidate"`
	// Keeps reports that the strategy keeps Candidate: the hand-over ends
	// with Candidate holding the lease.
	Keeps bool `json:"keeps"`
	// Outcome is one of the Preview constants.
	Outcome string `json:"outcome"`
	// Chosen is whom the lease goes to (or stays with) instead when Keeps
	// is false; empty when nobody or unknown.
	Chosen string `json:"chosen"`
	// Strategy is the lease's strategy as the controller resolved it.
	Strategy string `json:"strategy,omitempty"`
	// Reason is the deciding strategy's own reason.
	Reason string `json:"reason"`
	// Message says it all in one or two sentences, for an operator.
	Message string `json:"message"`
	// Steps are the decisions the preview made: on the live lease with
	// preferredHolder set, then on the free lease after the holder's
	// release.
	Steps []PreviewStep `json:"steps"`
}

// PreviewStep is one dry decision of a preview.
type PreviewStep struct {
	// Lease is the lease decided on: "held by H, preferredHolder C" or
	// "free after H stepped down".
	Lease    string `json:"lease"`
	Strategy string `json:"strategy"`
	Module   string `json:"module"`
	// Fallback is set when the lease's strategy failed (or is backing off)
	// and the fallback decided; Failure says why.
	Fallback bool     `json:"fallback,omitempty"`
	Failure  string   `json:"failure,omitempty"`
	Action   string   `json:"action"`
	Preempt  bool     `json:"preempt"`
	Ranking  []string `json:"ranking"`
	Reason   string   `json:"reason"`
	// Then is what the controller does with the decision:
	// "keep-preferred", "clear-preferred", "prefer", "grant",
	// "no-candidate" or "abstain"; Target whom it concerns.
	Then   string `json:"then"`
	Target string `json:"target,omitempty"`
}

type previewRequest struct {
	k         leaseKey
	candidate string
	reply     chan previewResult
}

type previewResult struct {
	p   HandOverPreview
	err error
}

// PreviewHandOver says what the election would do if spec.preferredHolder
// of lease namespace/name were set to candidate now, without writing
// anything. The worker computes it between two reconciles, so it sees the
// caches and the liveness memory the next reconcile would see. It waits
// for ctx; an error wraps ErrPreviewUnavailable or is ctx's.
func (c *Controller) PreviewHandOver(ctx context.Context, namespace, name, candidate string) (HandOverPreview, error) {
	r := previewRequest{k: leaseKey{namespace, name}, candidate: candidate, reply: make(chan previewResult, 1)}
	select {
	case c.previews <- r:
	case <-ctx.Done():
		return HandOverPreview{}, fmt.Errorf("%w: the election controller did not take the request: %w", ErrPreviewUnavailable, context.Cause(ctx))
	}
	select {
	case res := <-r.reply:
		return res.p, res.err
	case <-ctx.Done():
		return HandOverPreview{}, fmt.Errorf("%w: no answer from the election controller: %w", ErrPreviewUnavailable, context.Cause(ctx))
	}
}

// preview runs on the worker (runWorker). It restores the lease's decision
// sequence, so the real decision after a hand-over gets the sequence (and
// the seed) the preview used.
func (c *Controller) preview(ctx context.Context, k leaseKey, candidate string) (HandOverPreview, error) {
	p := HandOverPreview{Namespace: k.ns, Name: k.name, Candidate: candidate, Steps: []PreviewStep{}}
	if !c.learnLease(ctx, k) {
		return p, fmt.Errorf("%w: reading lease %s failed", ErrPreviewUnavailable, k)
	}
	r := previewRun{c: c, ctx: ctx, k: k, candidate: candidate, now: c.now(), byName: map[string]*candEntry{}}
	le, all, drained, _ := c.snapshot(k)
	if le == nil {
		return p.notElected("Lease %s does not exist.", k), nil
	}
	r.drained = drained
	r.lv = viewLease(le, r.now)
	p.Holder = r.lv.holder
	for _, e := range all {
		if c.valid(e, r.now) {
			r.valid = append(r.valid, e)
			r.byName[e.obj.Name] = e
		}
	}
	switch {
	case len(r.valid) == 0:
		return p.notElected("Lease %s has no valid LeaseCandidate: the election controller does not elect on it.", k), nil
	case r.byName[candidate] == nil:
		return p.notElected("%s is not a valid LeaseCandidate of lease %s: the election controller would clear preferredHolder at once.", candidate, k), nil
	case isDrained(drained, candidate):
		return p.notElected("%s is drained (by %s): the election controller never grants it a lease; undrain it first.", candidate, drained[candidate].By), nil
	case candidate == r.lv.holder && r.lv.live:
		p.Keeps, p.Outcome = true, PreviewHandsOver
		p.Message = candidate + " already holds the lease."
		return p, nil
	}
	strategy, conflict := resolveStrategy(r.valid)
	if conflict != "" {
		return p.notElected("The election controller does not elect on lease %s: %s.", k, conflict), nil
	}
	p.Strategy, r.strategy = strategy, strategy
	var found strategyLookup
	r.s, found = c.lookup(strategy)
	switch found {
	case strategyPending:
		return p, fmt.Errorf("%w: the strategy modules are still loading", ErrPreviewUnavailable)
	case strategyMissing:
		return p.notElected("No strategy module implements %s: the election controller does not elect on lease %s.", strategy, k), nil
	}
	r.m = c.memoFor(ctx, k)
	seq := r.m.seq
	defer func() { r.m.seq = seq }()
	free := r.lv
	if r.lv.live {
		var done bool
		if p, free, done = r.held(p); done {
			return p, nil
		}
	} else {
		// A free or expired lease: the next decision elects, seeing the
		// preferredHolder.
		free.preferred = candidate
	}
	return r.grant(p, free), nil
}

// previewRun is one hand-over preview's view of the lease, as the worker's
// next reconcile would see it.
type previewRun struct {
	c         *Controller
	ctx       context.Context
	k         leaseKey
	candidate string
	now       time.Time
	lv        leaseView
	valid     []*candEntry
	byName    map[string]*candEntry
	drained   map[string]history.DrainRecord
	strategy  string
	s         abi.Strategy
	m         *memo
}

// decide runs the strategy dry on the lease as lv shows it.
func (r *previewRun) decide(lv leaseView) decision {
	c := r.c
	progress := func(d *abi.Decision) error { return c.stalls(d, lv, r.valid, r.byName, r.now) }
	return c.decideAs(r.ctx, r.k, r.s, c.buildInput(r.k, r.m, r.strategy, lv, r.valid, r.drained, r.now), progress, true)
}

// held is the first step on a live lease: the decision with
// preferredHolder set to the candidate. done: the preview ends here;
// otherwise free is the lease once the holder stepped down.
func (r *previewRun) held(p HandOverPreview) (_ HandOverPreview, free leaseView, done bool) {
	c, lv, candidate, now := r.c, r.lv, r.candidate, r.now
	asked := lv
	asked.preferred = candidate
	dec := r.decide(asked)
	st := previewStep(fmt.Sprintf("held by %s, preferredHolder %s", lv.holder, candidate), dec)
	p.Reason = dec.d.Reason
	switch dec.d.Action {
	case abi.ActionAbstain:
		st.Then = "abstain"
		p.Steps = append(p.Steps, st)
		return p.abstains(dec), lv, true
	case abi.ActionKeep:
		st.Then, st.Target = "clear-preferred", lv.holder
		p.Steps = append(p.Steps, st)
		return p.keepsHolder(dec, "keeps the holder"), lv, true
	}
	if dec.d.Preempt && !dec.fallback && lv.strategy != "" {
		// handOver's plan: whom the controller would ask the holder
		// to step down for. Drained candidates are never asked,
		// whatever the ranking (applyDrains).
		ranking, _ := withoutDrained(dec.d.Ranking, r.drained)
		limit := len(ranking)
		if i := slices.Index(ranking, lv.holder); i >= 0 {
			limit = i
		}
		pl := c.planFor(ranking, r.byName, limit, c.opts.PingWindow, now, false)
		switch {
		case pl.target != "" && pl.target != candidate:
			st.Then, st.Target = "prefer", pl.target
			p.Steps = append(p.Steps, st)
			p.Outcome, p.Chosen = PreviewPrefersOther, pl.target
			p.Message = fmt.Sprintf("%s would not keep %s: it would hand the lease over to %s instead (%s).",
				strategyWho(dec), candidate, pl.target, c.choiceReason(dec.d.Ranking, pl.target, r.byName, now)+"; strategy: "+dec.d.Reason)
			return p, lv, true
		case pl.target == "" && !pl.blocked:
			st.Then, st.Target = "clear-preferred", lv.holder
			p.Steps = append(p.Steps, st)
			return p.keepsHolder(dec, "finds no live candidate better than the holder"), lv, true
		}
	}
	// preferredHolder stays: a coordinated holder steps down on it,
	// clearing it as it releases (client-go, leasehold run).
	st.Then, st.Target = "keep-preferred", candidate
	p.Steps = append(p.Steps, st)
	released := lv.obj.DeepCopy()
	empty, one, t := "", int32(1), metav1.NewMicroTime(now.Truncate(time.Microsecond))
	at := t
	released.Spec.HolderIdentity, released.Spec.LeaseDurationSeconds = &empty, &one
	released.Spec.RenewTime, released.Spec.AcquireTime, released.Spec.PreferredHolder = &t, &at, nil
	return p, viewLease(&leaseEntry{obj: released, renewSeen: now}, now), false
}

// grant is the decision on the free lease (after the holder stepped down,
// or already free or expired): to whom the controller would grant it.
func (r *previewRun) grant(p HandOverPreview, free leaseView) HandOverPreview {
	lv, candidate := r.lv, r.candidate
	on := "free"
	if lv.live {
		on = "free after " + lv.holder + " stepped down"
	} else if lv.holder != "" {
		on = "expired (last held by " + lv.holder + ")"
	}
	dec := r.decide(free)
	st := previewStep(on, dec)
	p.Reason = dec.d.Reason
	switch dec.d.Action {
	case abi.ActionAbstain:
		st.Then = "abstain"
		p.Steps = append(p.Steps, st)
		return p.abstains(dec)
	case abi.ActionKeep:
		st.Then = "no-candidate"
		p.Steps = append(p.Steps, st)
		p.Outcome = PreviewGrantsOther
		p.Message = fmt.Sprintf("%s would grant the %s lease to nobody (%s).", strategyWho(dec), on, dec.d.Reason)
		return p
	}
	// elect's grant: the first ranked candidate that answers the ping of
	// the new round; one that ignored its last ping is not asked again.
	grantee := ""
	granted, _ := withoutDrained(dec.d.Ranking, r.drained) // applyDrains
	for _, name := range granted {
		if r.c.state(r.byName[name], r.now) != stUnresponsive {
			grantee = name
			break
		}
	}
	st.Then, st.Target = "grant", grantee
	p.Steps = append(p.Steps, st)
	switch grantee {
	case candidate:
		p.Keeps, p.Outcome = true, PreviewHandsOver
		if lv.live {
			p.Message = fmt.Sprintf("%s keeps %s: %s steps down and the lease goes to %s (%s).", strategyWho(dec), candidate, lv.holder, candidate, dec.d.Reason)
		} else {
			p.Message = fmt.Sprintf("%s grants the %s lease to %s (%s).", strategyWho(dec), on, candidate, dec.d.Reason)
		}
	case "":
		p.Outcome = PreviewGrantsOther
		p.Message = fmt.Sprintf("%s ranks no candidate that may answer for the %s lease (%s): nobody would get it.", strategyWho(dec), on, dec.d.Reason)
	default:
		p.Outcome, p.Chosen = PreviewGrantsOther, grantee
		p.Message = fmt.Sprintf("%s would not keep %s: on the %s lease it grants the lease to %s (%s).", strategyWho(dec), candidate, on, grantee, dec.d.Reason)
		if grantee == lv.holder {
			p.Message = fmt.Sprintf("%s would not keep %s: %s would step down for nothing, and the strategy grants the lease back to %s (%s).", strategyWho(dec), candidate, lv.holder, grantee, dec.d.Reason)
		}
	}
	return p
}

func (p HandOverPreview) notElected(format string, args ...any) HandOverPreview {
	p.Outcome, p.Message = PreviewNotElected, fmt.Sprintf(format, args...)
	return p
}

func (p HandOverPreview) abstains(dec decision) HandOverPreview {
	p.Outcome = PreviewAbstains
	p.Message = fmt.Sprintf("%s abstains (%s): the election controller leaves the lease alone, so nothing says %s would get it.",
		strategyWho(dec), dec.d.Reason, p.Candidate)
	return p
}

func (p HandOverPreview) keepsHolder(dec decision, what string) HandOverPreview {
	p.Outcome, p.Chosen = PreviewKeepsHolder, p.Holder
	p.Message = fmt.Sprintf("%s would not keep %s: it %s, %s (%s), and the election controller would clear preferredHolder again.",
		strategyWho(dec), p.Candidate, what, p.Holder, dec.d.Reason)
	return p
}

// strategyWho names who decided, the fallback included.
func strategyWho(dec decision) string {
	if dec.fallback {
		return "The fallback strategy " + dec.strategy + " (the lease's strategy failed)"
	}
	return "The strategy " + dec.strategy
}

func previewStep(lease string, dec decision) PreviewStep {
	st := PreviewStep{Lease: lease, Strategy: dec.strategy, Module: moduleString(dec.module), Fallback: dec.fallback,
		Action: string(dec.d.Action), Preempt: dec.d.Preempt, Ranking: append([]string{}, dec.d.Ranking...), Reason: dec.d.Reason}
	if dec.failure != nil {
		st.Failure = strings.TrimSpace(dec.failure.Error())
	}
	return st
}

func isDrained(drained map[string]history.DrainRecord, name string) bool {
	_, ok := drained[name]
	return ok
}
