package election

import "sync/atomic"

// Stats are the controller's counters since New, for metrics. Upstream
// never shipped the metrics its KEP lists; these cover them and more.
type Stats struct {
	// Decisions counts strategy decisions (including fallbacks).
	Decisions uint64 `json:"decisions"`
	// Grants counts leases granted (created, vacant, expired or released).
	Grants uint64 `json:"grants"`
	// Preemptions counts preferredHolder set on a live holder.
	Preemptions uint64 `json:"preemptions"`
	// PreferredCleared counts stale or obsolete preferredHolder removed.
	PreferredCleared uint64 `json:"preferredCleared"`
	// Fallbacks counts decisions made by the fallback strategy, including
	// those made without calling a module that is backing off.
	Fallbacks uint64 `json:"fallbacks"`
	// StrategyErrors counts failed Decide calls (error, timeout, panic,
	// invalid decision), the fallback's own failures included.
	StrategyErrors uint64 `json:"strategyErrors"`
	// Conflicts counts incidents of candidates declaring different
	// strategies at the highest binary version.
	Conflicts uint64 `json:"conflicts"`
	// Abstentions counts incidents of leases left alone: unknown strategy
	// name or a strategy that abstained.
	Abstentions uint64 `json:"abstentions"`
	// Pings counts pingTime writes.
	Pings uint64 `json:"pings"`
	// WriteErrors counts failed lease or candidate writes.
	WriteErrors uint64 `json:"writeErrors"`
	// CandidatesCollected counts stale candidates deleted by the GC.
	CandidatesCollected uint64 `json:"candidatesCollected"`
	// BackedOff counts strategy calls skipped because the module was
	// within its failure backoff (the fallback decided instead).
	BackedOff uint64 `json:"backedOff"`
}

// counters is Stats with atomic fields, plus counters Stats does not
// show yet (web/metrics writes every Stats field it knows to /metrics).
type counters struct {
	decisions, grants, preemptions, cleared, fallbacks, strategyErrors,
	conflicts, abstentions, pings, writeErrors, collected, backedOff atomic.Uint64
	// reused counts reconciles that reused the lease's last decision
	// (only the holder's renewals changed) instead of calling a strategy.
	reused atomic.Uint64
	// moves counts grants moved before their holder confirmed them
	// (counted in grants too).
	moves atomic.Uint64
	// stalls counts well-formed decisions that failed the progress check
	// (progress.go); they count in strategyErrors too.
	stalls atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (c *Controller) Stats() Stats {
	s := &c.stats
	return Stats{
		Decisions:           s.decisions.Load(),
		Grants:              s.grants.Load(),
		Preemptions:         s.preemptions.Load(),
		PreferredCleared:    s.cleared.Load(),
		Fallbacks:           s.fallbacks.Load(),
		StrategyErrors:      s.strategyErrors.Load(),
		Conflicts:           s.conflicts.Load(),
		Abstentions:         s.abstentions.Load(),
		Pings:               s.pings.Load(),
		WriteErrors:         s.writeErrors.Load(),
		CandidatesCollected: s.collected.Load(),
		BackedOff:           s.backedOff.Load(),
	}
}
