package election

import "time"

// candState is a candidate's liveness in the current round, judged only
// from what the controller itself observed and when (never from the
// candidate's renewTime against our clock).
type candState int

const (
	// stIdle: no recent proof of life and no ping outstanding; pingable.
	stIdle candState = iota
	// stAcked: a renewal (an ack, or a renewal of its own) was observed
	// within the ping window and after our last ping: eligible for grants.
	stAcked
	// stPending: pinged, no answer yet, ping window still open.
	stPending
	// stUnresponsive: ignored its last ping; not pinged again before
	// UnresponsiveRetry unless it renews by itself.
	stUnresponsive
)

func (s candState) String() string {
	switch s {
	case stAcked:
		return "acked"
	case stPending:
		return "pending"
	case stUnresponsive:
		return "unresponsive"
	}
	return "unknown"
}

func (c *Controller) state(e *candEntry, now time.Time) candState {
	if !e.ackAt.IsZero() && !e.ackAt.Before(e.pingAt) && now.Sub(e.ackAt) < c.opts.PingWindow {
		return stAcked
	}
	if !e.pingAt.IsZero() && e.ackAt.Before(e.pingAt) {
		if now.Before(e.pingAt.Add(c.opts.PingWindow)) {
			return stPending
		}
		if now.Before(e.pingAt.Add(c.opts.UnresponsiveRetry)) {
			return stUnresponsive
		}
	}
	return stIdle
}

// valid reports an unexpired candidate (upstream: renewTime within
// leaseCandidateValidDuration).
func (c *Controller) valid(e *candEntry, now time.Time) bool {
	return !e.renewAt.IsZero() && !now.After(e.renewAt.Add(c.opts.CandidateValidity))
}

// quickAckFloor is the least a better candidate's ack is awaited on a
// vacant lease once another candidate of its round answered (planFor).
const quickAckFloor = 100 * time.Millisecond

// plan is the outcome of walking a ranking for a grant or a hand-over.
type plan struct {
	// target is the first acked candidate with nobody better still
	// expected to answer; empty if none (yet).
	target string
	// toPing are idle candidates within the walked part of the ranking.
	toPing []string
	// blocked means a better candidate may still answer: decide again at
	// waitUntil (or on its ack).
	blocked   bool
	waitUntil time.Time
	// retryAt is when the first unresponsive candidate becomes pingable.
	retryAt time.Time
}

// planFor walks ranking[:limit] best first. Idle candidates are pinged
// (all of them at once, like upstream's parallel pings, so that a
// non-answering top candidate does not cost one round per rank); the
// target is the first acked candidate such that every better one is
// unresponsive or has had wait to answer. With quick (a vacant lease,
// where nobody leads meanwhile), once a candidate of the round answered,
// a better one is awaited only twice as long as that fastest ack took
// (at least quickAckFloor, at most wait): alive, it answers about as fast
// as the others; a dead one (the holder whose lease just lapsed, a
// component that exited and left its LeaseCandidate behind) no longer
// holds the election back for wait. Should a better one answer later, the
// grant is still unconfirmed and moves to it at once (action.move).
func (c *Controller) planFor(ranking []string, cands map[string]*candEntry, limit int, wait time.Duration, now time.Time, quick bool) plan {
	var p plan
	fastest := time.Duration(-1)
	for _, name := range ranking[:limit] {
		e := cands[name]
		switch c.state(e, now) {
		case stIdle:
			p.toPing = append(p.toPing, name)
		case stUnresponsive:
			p.retryAt = earliest(p.retryAt, e.pingAt.Add(c.opts.UnresponsiveRetry))
		case stAcked:
			if !e.pingAt.IsZero() && (fastest < 0 || e.ackAt.Sub(e.pingAt) < fastest) {
				fastest = e.ackAt.Sub(e.pingAt)
			}
		}
	}
	for _, name := range ranking[:limit] {
		e := cands[name]
		w := wait
		if quick && fastest >= 0 {
			w = min(w, max(2*fastest, c.quickAckFloor))
		}
		switch c.state(e, now) {
		case stAcked:
			p.target = name
			return p
		case stPending:
			if until := e.pingAt.Add(w); now.Before(until) {
				p.blocked, p.waitUntil = true, until
				return p
			}
		case stIdle:
			p.blocked, p.waitUntil = true, now.Add(w)
			return p
		}
	}
	return p
}

// earliest is the earlier of two deadlines, zero meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.Before(a):
		return b
	}
	return a
}
