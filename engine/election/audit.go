package election

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
)

// Annotations written on a Lease with every grant, so that `kubectl get
// lease -o yaml` tells who was elected by what and why.
const (
	// AnnotationStrategy names the strategy that chose the holder.
	AnnotationStrategy = "leasehold.dev/elected-by-strategy"
	// AnnotationModule is "name@version sha256:<hex>" of the module.
	AnnotationModule = "leasehold.dev/elected-by-module"
	// AnnotationReason is the strategy's short reason.
	AnnotationReason = "leasehold.dev/election-reason"
	// AnnotationFallbackFrom, present only after a fallback, names the
	// lease's strategy that failed.
	AnnotationFallbackFrom = "leasehold.dev/election-fallback-from"
	// AnnotationGrantedRenewTime is the spec.renewTime the grant wrote
	// (RFC 3339, microseconds). While spec.renewTime still equals it, the
	// holder has not confirmed the grant: client-go's coordinated elector
	// and leasehold run --candidate start leading only after their own
	// renewal succeeded, and every renewal writes a new renewTime. Such a
	// grant may be moved to a better candidate at once (compare-and-swap
	// on the resourceVersion, so a confirmation and a move never both
	// succeed). Kept on the lease, the mark survives a controller restart.
	AnnotationGrantedRenewTime = "leasehold.dev/granted-renew-time"
)

// maxAnnotationReason bounds the reason annotation.
const maxAnnotationReason = 256

// memo is the controller's memory of one coordinated lease.
type memo struct {
	seq           int64
	history       []abi.HistoryEntry
	historyLoaded bool
	// incidents maps a category ("conflict", "unknown", "abstain",
	// "failure", "nocandidate") to the detail of the ongoing incident, so
	// that each is logged and recorded once until it is over.
	incidents map[string]string
	// candidatesSince is when the controller last began to see valid
	// candidates of the lease (it had none before, or it just started): a
	// grant of a vacancy older than that waits FirstGrantWait from then.
	candidatesSince time.Time
	// unserved maps a candidate to the reason it cannot be served that
	// was last reported (unserved.go).
	unserved map[string]string
	// last is the latest strategy decision, reused while nothing it
	// depends on changed (see reuse.go).
	last *lastDecision
}

func (c *Controller) memoFor(ctx context.Context, k leaseKey) *memo {
	c.mu.Lock()
	m := c.memos[k]
	if m == nil {
		m = &memo{incidents: map[string]string{}}
		c.memos[k] = m
	}
	c.mu.Unlock()
	if !m.historyLoaded {
		m.historyLoaded = true
		recs, err := c.h.Decisions(ctx, k.ns, k.name)
		if err != nil {
			c.log.Warn("Reading decision history failed", "lease", k.String(), "err", err)
		}
		for _, r := range recs {
			m.remember(r, c.opts.HistoryInput)
			m.seq = max(m.seq, r.Seq)
		}
	}
	return m
}

// incident reports whether detail starts a new incident of category.
func (m *memo) incident(category, detail string) bool {
	if old, ok := m.incidents[category]; ok && old == detail {
		return false
	}
	m.incidents[category] = detail
	return true
}

// resolved ends the incident of category, if any.
func (m *memo) resolved(category string) { delete(m.incidents, category) }

// remember feeds a recorded decision into the history strategies see.
func (m *memo) remember(r history.DecisionRecord, keep int) {
	if r.Chosen == "" {
		return
	}
	m.history = append(m.history, abi.HistoryEntry{Seq: r.Seq, TimeUs: r.Time.UnixMicro(),
		Chosen: r.Chosen, Holder: r.Holder, Reason: r.Reason})
	if n := len(m.history); n > keep {
		m.history = append([]abi.HistoryEntry(nil), m.history[n-keep:]...)
	}
}

// newRecord starts an audit record of a decision on k.
func (c *Controller) newRecord(m *memo, now time.Time, trigger abi.Reason, strategy string, lv leaseView,
	cands []*candEntry, dec *decision) history.DecisionRecord {
	r := history.DecisionRecord{Time: c.wall().UTC(), Seq: m.seq, Trigger: string(trigger), Strategy: strategy, Holder: lv.holder}
	for _, e := range cands {
		st := c.state(e, now)
		r.Candidates = append(r.Candidates, history.DecisionCandidate{
			Name: e.obj.Name, BinaryVersion: e.obj.Spec.BinaryVersion, EmulationVersion: e.obj.Spec.EmulationVersion,
			Strategy: string(e.obj.Spec.Strategy), Acked: st == stAcked, State: st.String()})
	}
	sort.Slice(r.Candidates, func(i, j int) bool { return r.Candidates[i].Name < r.Candidates[j].Name })
	if dec != nil {
		r.Module = history.DecisionModule{Name: dec.module.Name, Version: dec.module.Version,
			SHA256: dec.module.SHA256, Builtin: dec.module.Builtin, SettingsSHA256: dec.module.SettingsSHA256}
		r.Input = dec.in
		if dec.d != nil {
			d := *dec.d
			d.Ranking = append([]string(nil), d.Ranking...)
			r.Decision = &d
		}
		r.Fallback = dec.fallback
		r.Ranking = append([]string(nil), dec.d.Ranking...)
		r.Reason = dec.d.Reason
		if dec.fallback && dec.failure != nil {
			r.Reason = "fallback after strategy failure (" + dec.failure.Error() + "): " + dec.d.Reason
		}
	}
	return r
}

// record persists r (bounded history) and feeds it to later decisions.
// A storage failure is logged, never fatal: auditing must not stop
// elections.
func (c *Controller) record(ctx context.Context, k leaseKey, m *memo, r history.DecisionRecord) {
	r.Reason = truncate(r.Reason, abi.MaxReasonBytes)
	if err := c.h.RecordDecision(ctx, k.ns, k.name, r, c.opts.HistoryLimit); err != nil {
		c.log.Warn("Recording election decision failed", "lease", k.String(), "err", err)
	}
	c.recordLeaseEvent(ctx, k, r)
	m.remember(r, c.opts.HistoryInput)
}

// truncate cuts s to n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// choiceReason says whom a grant or a preference chose and why the
// candidates the strategy ranked above it were passed over. The
// strategy's own reason speaks of its ranking ("c-old has the oldest
// versions"), which the controller applies only to candidates that answer
// a ping: alone, it named the candidate that was not chosen.
func (c *Controller) choiceReason(ranking []string, chosen string, byName map[string]*candEntry, now time.Time) string {
	i := slices.Index(ranking, chosen)
	switch {
	case i < 0:
		return chosen + " chosen"
	case i == 0 && len(ranking) == 1:
		return chosen + " chosen: the only one ranked"
	case i == 0:
		return fmt.Sprintf("%s chosen: ranked first of %d", chosen, len(ranking))
	}
	skipped := make([]string, 0, i)
	for _, name := range ranking[:i] {
		why := "is not a valid candidate"
		if e := byName[name]; e != nil {
			switch st := c.state(e, now); st {
			case stPending, stUnresponsive:
				why = "did not answer its ping"
			default:
				why = "was " + st.String()
			}
		}
		skipped = append(skipped, name+" "+why)
	}
	return fmt.Sprintf("%s chosen: ranked %d of %d, the first to answer (%s)", chosen, i+1, len(ranking), strings.Join(skipped, ", "))
}
