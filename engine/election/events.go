package election

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/leasehold/leasehold/engine"
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

// recordLeaseEvent records the Event of an audited decision that changed
// the lease or failed its strategy; other decisions (abstentions,
// conflicts, cleared preferences) stay in the decision history only.
// Like the history, a failure to record is logged, never fatal.
func (c *Controller) recordLeaseEvent(ctx context.Context, k leaseKey, r engine.DecisionRecord) {
	if r.Outcome != "ok" {
		return
	}
	eventType, reason, msg := corev1.EventTypeNormal, "", ""
	by := "strategy " + r.Strategy
	if r.Module.Name != "" {
		by += " (module " + r.Module.Name + ")"
	}
	switch r.Action {
	case "grant":
		reason, msg = EventElected, fmt.Sprintf("Granted to %s by %s", r.Chosen, by)
		if r.Trigger == string(abi.ReasonLeaseExpired) && r.Holder != "" {
			reason, msg = EventExpiredRegranted, fmt.Sprintf("Lease of %s expired; granted to %s by %s", r.Holder, r.Chosen, by)
		}
		if r.Fallback {
			msg += ", the fallback after the lease's strategy failed"
		}
	case "prefer":
		reason, msg = EventHandedOver, fmt.Sprintf("Handing over from %s to %s (preferredHolder) by %s", r.Holder, r.Chosen, by)
	case "strategy-error":
		eventType, reason = corev1.EventTypeWarning, EventStrategyFailed
		msg = fmt.Sprintf("Strategy %s failed, the built-in strategy decides without preemption: %s", r.Strategy, r.Reason)
	default:
		return
	}
	ref := corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: k.ns, Name: k.name}
	if err := c.e.RecordEvent(ctx, ref, eventType, reason, msg); err != nil {
		c.log.Warn("Recording election event failed", "lease", k.String(), "reason", reason, "err", err)
	}
}
