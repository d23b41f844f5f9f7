package election

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// A candidate that can never be granted its lease must say why: a
// LeaseCandidate applied with kubectl has nothing that renews it or
// answers pings, and until now it was silently ignored (no renewTime) or
// silently pinged forever. Each reconcile collects, per candidate, why it
// cannot be served now; a new (candidate, reason) pair is logged once and
// recorded in the lease's decision history (action "unserved"), which the
// web UI shows with the lease.
//
// Events are the Kubernetes way to say this; leasehold has none yet, so
// the log and the history carry it.

// unservedWhy maps a candidate name to why it cannot be served.
type unservedWhy map[string]string

// invalidReason says why a candidate the validity rule ignores is ignored.
func (c *Controller) invalidReason(e *candEntry) string {
	if e.obj.Spec.RenewTime == nil {
		return "spec.renewTime is not set, so the candidate is ignored: nothing renews it " +
			"(a runner such as client-go's leaderelection.NewCandidate or leasehold run --candidate does, and answers pings)"
	}
	return fmt.Sprintf("not renewed for over %v (spec.renewTime %s), so the candidate is ignored until it renews",
		c.opts.CandidateValidity, e.obj.Spec.RenewTime.UTC().Format(time.RFC3339))
}

// unresponsiveReason is the reason of a candidate that ignored its ping.
func (c *Controller) unresponsiveReason() string {
	return fmt.Sprintf("did not answer a ping within %v: nothing seems to renew it "+
		"(a runner such as client-go's leaderelection.NewCandidate or leasehold run --candidate answers pings)", c.opts.PingWindow)
}

// unranked adds the valid candidates the decision leaves out of its
// ranking, with a hint when their versions do not parse.
func unranked(why unservedWhy, dec decision, valid []*candEntry) {
	if dec.d == nil || dec.d.Action == abi.ActionAbstain {
		return
	}
	for _, e := range valid {
		if slices.Contains(dec.d.Ranking, e.obj.Name) || why[e.obj.Name] != "" {
			continue
		}
		r := "the strategy " + dec.strategy + " leaves it out of its ranking"
		var bad []string
		if v := e.obj.Spec.BinaryVersion; !abi.ParseVersion(v).Valid {
			bad = append(bad, fmt.Sprintf("binaryVersion %q", v))
		}
		if v := e.obj.Spec.EmulationVersion; !abi.ParseVersion(v).Valid {
			bad = append(bad, fmt.Sprintf("emulationVersion %q", v))
		}
		if len(bad) > 0 {
			r += " (" + strings.Join(bad, " and ") + " is not a version)"
		}
		why[e.obj.Name] = r
	}
}

// noteUnserved logs and records the (candidate, reason) pairs of why that
// are new for lease k, and forgets those that are over: a candidate that
// answers, one that is gone, or one whose reason is no longer true (an
// unresponsive candidate stays reported while it is pinged again, so that
// it is not reported anew every UnresponsiveRetry).
func (c *Controller) noteUnserved(ctx context.Context, k leaseKey, m *memo, why unservedWhy,
	all []*candEntry, lv leaseView, strategy string, now time.Time) {
	byName := make(map[string]*candEntry, len(all))
	for _, e := range all {
		byName[e.obj.Name] = e
	}
	unresponsive := c.unresponsiveReason()
	for name, old := range m.unserved {
		cur, e := why[name], byName[name]
		pingedAgain := cur == "" && old == unresponsive && e != nil && c.valid(e, now) && c.state(e, now) != stAcked
		if cur != old && !pingedAgain {
			delete(m.unserved, name)
		}
	}
	var fresh []string
	for name, r := range why {
		if m.unserved[name] == r {
			continue
		}
		if m.unserved == nil {
			m.unserved = map[string]string{}
		}
		m.unserved[name] = r
		fresh = append(fresh, name)
	}
	if len(fresh) == 0 {
		return
	}
	sort.Strings(fresh)
	parts := make([]string, len(fresh))
	for i, name := range fresh {
		c.log.Warn("Lease candidate cannot be served", "lease", k.String(), "candidate", name, "reason", why[name])
		parts[i] = name + ": " + why[name]
	}
	r := c.newRecord(m, now, lv.trigger(), strategy, lv, all, nil)
	r.Action, r.Reason, r.Outcome = "unserved", strings.Join(parts, "; "), "ok"
	c.record(ctx, k, m, r)
}

// noteUnresponsive completes why with the valid candidates that ignored
// their last ping and those the decision leaves out of its ranking, on
// the cache as it is after the decision's pings, and reports it (see
// noteUnserved). It returns when a pending ping's window ends, so that a
// candidate that never answers is reported then even if nothing else
// happens to the lease.
func (c *Controller) noteUnresponsive(ctx context.Context, k leaseKey, m *memo, why unservedWhy, dec decision,
	valid []*candEntry, lv leaseView, strategy string) time.Time {
	now := c.now()
	_, all, _, _ := c.snapshot(k)
	var at time.Time
	for _, e := range all {
		if !c.valid(e, now) {
			continue
		}
		switch c.state(e, now) {
		case stUnresponsive:
			why[e.obj.Name] = c.unresponsiveReason()
		case stPending:
			at = earliest(at, e.pingAt.Add(c.opts.PingWindow+time.Millisecond))
		}
	}
	unranked(why, dec, valid)
	c.noteUnserved(ctx, k, m, why, all, lv, strategy, now)
	return at
}
