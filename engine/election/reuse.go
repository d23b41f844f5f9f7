package election

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
	"k8s.io/apimachinery/pkg/types"
)

// A holder renews its lease every RetryPeriod (client-go: 2 s), and each
// renewal is a lease event. Calling the strategy for each would cost CPU
// per coordinated lease for nothing (the answer cannot change), and with a
// looping module a whole DecideTimeout per renewal on the single worker,
// delaying every other election. So the last decision on a live lease is
// reused while nothing a strategy may look at changed.
//
// The action is still re-run with the reused decision: it works from the
// current liveness (pings, grants, waits) and only writes when the lease
// is not yet as decided, so a renewal alone writes and records nothing.

// lastDecision is a strategy decision kept for reuse.
type lastDecision struct {
	key string
	dec decision
	at  time.Time
	// resyncs is Controller.resyncs when the decision began.
	resyncs uint64
	live    bool
}

// decideOrReuse returns the decision on lease k and its trigger: the last
// one if reusable, else a fresh one from s (with fallback).
func (c *Controller) decideOrReuse(ctx context.Context, k leaseKey, m *memo, s abi.Strategy, strategy string,
	lv leaseView, valid []*candEntry, drained map[string]history.DrainRecord, resyncs uint64, now time.Time, progress progressCheck) (decision, abi.Reason) {
	key := c.decisionKey(s, lv, valid, drained, m, now)
	if dec, ok := c.reusable(k, m, s, key, lv, now); ok {
		c.stats.reused.Add(1)
		return dec, lv.trigger()
	}
	in := c.buildInput(k, m, strategy, lv, valid, drained, now)
	dec := c.decide(ctx, k, s, in, progress)
	c.stats.decisions.Add(1)
	c.noteFailure(ctx, k, m, s, strategy, lv, valid, in.Reason, dec, now)
	m.last = &lastDecision{key: key, dec: dec, at: now, resyncs: resyncs, live: lv.live}
	return dec, in.Reason
}

// reusable returns m's last decision if it was made on the lease live as
// it is now, with the same key, since the latest Resync and within
// ResyncPeriod (the periodic re-check bounds reuse, as upstream's resync).
// Expiry needs no check here: an expired lease is not live.
func (c *Controller) reusable(k leaseKey, m *memo, s abi.Strategy, key string, lv leaseView, now time.Time) (decision, bool) {
	l := m.last
	switch {
	case l == nil || !l.live || !lv.live || l.key != key:
		return decision{}, false
	case l.resyncs != c.resyncs.Load() || now.Sub(l.at) >= c.opts.ResyncPeriod:
		return decision{}, false
	case l.dec.fallback && !c.backoff.active(k, s, now):
		// The failed module's window is over: give it its next chance
		// rather than keeping the fallback's answer (which never preempts).
		return decision{}, false
	}
	return l.dec, true
}

// decisionKey encodes what a decision depends on, except what a holder's
// renewal changes (renewTime, leaseDurationSeconds, resourceVersion, the
// observation time) and the clock: the strategy's module, the lease's
// identity, holder, preferredHolder, strategy, acquireTime and
// transitions, the history a strategy sees, and each valid candidate's
// identity, versions, strategy, labels, observed renew, ack and ping times
// and liveness state (a state changes with time alone, e.g. an ack getting
// old, and strategies see it as Acked), and whether it is drained.
func (c *Controller) decisionKey(s abi.Strategy, lv leaseView, valid []*candEntry, drained map[string]history.DrainRecord, m *memo, now time.Time) string {
	var b strings.Builder
	add := func(parts ...string) {
		for _, p := range parts {
			b.WriteString(p)
			b.WriteByte(0)
		}
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "0"
		}
		return strconv.FormatInt(t.UnixNano(), 10)
	}
	add(s.Name(), moduleString(s.Module()))
	var uid types.UID
	var acquire time.Time
	var transitions int32
	if lv.exists {
		uid, transitions = lv.obj.UID, derefI32(lv.obj.Spec.LeaseTransitions)
		if at := lv.obj.Spec.AcquireTime; at != nil {
			acquire = at.Time
		}
	}
	add(string(uid), lv.holder, lv.preferred, lv.strategy, ts(acquire), strconv.Itoa(int(transitions)))
	if n := len(m.history); n > 0 {
		add(strconv.FormatInt(m.history[n-1].Seq, 10))
	}
	for _, e := range valid {
		o := e.obj
		add("\x01", o.Name, string(o.UID), o.Spec.BinaryVersion, o.Spec.EmulationVersion, string(o.Spec.Strategy),
			ts(e.renewAt), ts(e.ackAt), ts(e.pingAt), c.state(e, now).String())
		if _, ok := drained[o.Name]; ok {
			add("drained")
		}
		labels := make([]string, 0, len(o.Labels))
		for lk, lval := range o.Labels {
			labels = append(labels, lk+"="+lval)
		}
		slices.Sort(labels)
		add(labels...)
	}
	return b.String()
}
