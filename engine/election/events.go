package election

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
)

// Event reasons of the Events the controller records on a Lease, so that
// `kubectl describe lease` and `kubectl get events` tell the story of an
// election next to the decision history.
const (
	EventElected          = "Elected"
	EventExpiredRegranted = "ExpiredRegranted"
	EventHandedOver       = "HandedOver"
	EventStrategyFailed   = "StrategyFailed"
)

// leaseEvent is one event to record on a lease.
type leaseEvent struct{ eventType, reason, message string }

// pendingEvents holds the events about a lease that did not exist yet
// (a strategy that failed on its first election), recorded with the grant
// that creates it; keyed by controller and lease.
var pendingEvents sync.Map // pendingKey -> leaseEvent

type pendingKey struct {
	c *Controller
	k leaseKey
}

// recordLeaseEvent records the Event of an audited decision that changed
// the lease or failed its strategy; other decisions (abstentions,
// conflicts, cleared preferences) stay in the decision history only.
// Like the history, a failure to record is logged, never fatal.
func (c *Controller) recordLeaseEvent(ctx context.Context, k leaseKey, r history.DecisionRecord) {
	ev, ok := leaseEventOf(r)
	if !ok {
		return
	}
	pk := pendingKey{c, k}
	if p, found := pendingEvents.LoadAndDelete(pk); found && r.Action == "grant" {
		c.emitLeaseEvent(ctx, k, p.(leaseEvent))
	}
	if err := c.emitLeaseEvent(ctx, k, ev); errors.Is(err, engine.ErrNoSuchObject) && ev.eventType == corev1.EventTypeWarning {
		pendingEvents.Store(pk, ev)
	}
}

func (c *Controller) emitLeaseEvent(ctx context.Context, k leaseKey, ev leaseEvent) error {
	ref := corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: k.ns, Name: k.name}
	err := c.e.RecordEvent(ctx, ref, ev.eventType, ev.reason, ev.message)
	if err != nil && !errors.Is(err, engine.ErrNoSuchObject) {
		c.log.Warn("Recording election event failed", "lease", k.String(), "reason", ev.reason, "err", err)
	}
	return err
}

// leaseEventOf says what a decision tells in an Event, if anything.
func leaseEventOf(r history.DecisionRecord) (leaseEvent, bool) {
	if r.Outcome != "ok" {
		return leaseEvent{}, false
	}
	by := "strategy " + r.Strategy
	if r.Module.Name != "" {
		by += " (module " + r.Module.Name + ")"
	}
	switch r.Action {
	case "grant":
		ev := leaseEvent{corev1.EventTypeNormal, EventElected, fmt.Sprintf("Granted to %s by %s", r.Chosen, by)}
		if r.Trigger == string(abi.ReasonLeaseExpired) && r.Holder != "" {
			ev.reason, ev.message = EventExpiredRegranted, fmt.Sprintf("Lease of %s expired; granted to %s by %s", r.Holder, r.Chosen, by)
		}
		if r.Fallback {
			ev.message += ", the fallback after the lease's strategy failed"
		}
		return ev, true
	case "prefer":
		return leaseEvent{corev1.EventTypeNormal, EventHandedOver,
			fmt.Sprintf("Handing over from %s to %s (preferredHolder) by %s", r.Holder, r.Chosen, by)}, true
	case "strategy-error":
		return leaseEvent{corev1.EventTypeWarning, EventStrategyFailed,
			fmt.Sprintf("Strategy %s failed, the built-in strategy decides without preemption: %s", r.Strategy, r.Reason)}, true
	}
	return leaseEvent{}, false
}
