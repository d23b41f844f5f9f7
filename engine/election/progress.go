package election

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// A strategy answer can be well-formed (known action, only candidate
// names, each once) and still stop the election: ranking only a holder
// that died, say, keeps a vacant lease waiting on a candidate that will
// never answer while one that did answer is left out. Every ranked
// candidate is pinged, found unresponsive and re-pinged only after
// UnresponsiveRetry, so such an answer costs minutes of leaderlessness on
// every reconcile, without a single error to fall back on.
//
// So on a vacant lease a decision must make progress: grant to a ranked
// candidate that answered, or wait (GrantAckWait) for a ranked one that
// may still answer. One that does neither while some valid candidate has
// answered is a strategy failure like an invalid answer: the module backs
// off on this lease, the fallback decides, and the decision history
// records the incident. A live lease needs no progress (the holder leads),
// and abstaining is not judged: it is a declared refusal, recorded as such.
//
// A candidate the ranking leaves out is never pinged for the ranking's
// sake, so a stalled ranking would not learn that one is alive: elect
// probes the unranked idle candidates (one ping each, then
// UnresponsiveRetry as any ping) when the ranking made no progress, and
// their acks bring the decision back to be judged.

// errNoProgress is wrapped by the progress check's errors.
var errNoProgress = errors.New("decision elects nobody on a vacant lease")

// stalls returns an error wrapping errNoProgress if d, on vacant lease
// lv, neither grants to nor waits for a ranked candidate while one of
// valid (the round's candidates, sorted by name) answered.
func (c *Controller) stalls(d *abi.Decision, lv leaseView, valid []*candEntry, byName map[string]*candEntry, now time.Time) error {
	if lv.live || d.Action == abi.ActionAbstain {
		return nil
	}
	if d.Action == abi.ActionPrefer {
		p := c.planFor(d.Ranking, byName, len(d.Ranking), c.opts.GrantAckWait, now, false)
		if p.target != "" || p.blocked {
			return nil
		}
	}
	for _, e := range valid {
		if c.state(e, now) == stAcked {
			return fmt.Errorf("%w: action %s ranking [%s] has no candidate that answered, while %s did",
				errNoProgress, d.Action, strings.Join(d.Ranking, " "), e.obj.Name)
		}
	}
	return nil
}

// unrankedIdle are the valid candidates ranking leaves out that may be
// pinged now: the probe of a ranking that made no progress.
func (c *Controller) unrankedIdle(ranking []string, valid []*candEntry, now time.Time) []string {
	ranked := make(map[string]bool, len(ranking))
	for _, name := range ranking {
		ranked[name] = true
	}
	var idle []string
	for _, e := range valid {
		if !ranked[e.obj.Name] && c.state(e, now) == stIdle {
			idle = append(idle, e.obj.Name)
		}
	}
	return idle
}
