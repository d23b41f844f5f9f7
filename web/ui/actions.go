package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/web/apiserver"
)

// Operator actions. The page does each one through the Kubernetes API with
// the user's own token, exactly as kubectl would (a merge patch or a
// DELETE), so it meets the same authorization. Then it asks the server to
// record it here, in the lease's decision history, with the name the
// request was authenticated as: the audit trail names who did it, not what
// the page claims. The server records only what the lease shows to have
// happened, and only for a user allowed the action itself (the web filter
// authorizes this endpoint as the action's verb on the lease).
const (
	ActionRelease  = "release"  // force release: clear spec.holderIdentity
	ActionStepDown = "stepdown" // ask the holder to step down (AnnotationStepDown)
	ActionHandOver = "handover" // set spec.preferredHolder
	ActionDelete   = "delete"   // delete the lease
)

// AnnotationStepDown asks the holder it names to step down: "leasehold
// run" (web/client/run's constant of the same name, which the end-to-end
// tests hold equal to this one) stops its child and releases the lease
// itself, so the next holder need not wait out its lease as after a forced
// release.
const AnnotationStepDown = "leasehold.dev/step-down"

// OperatorTrigger is the Trigger of the decision records of operator
// actions, which the election controller never uses.
const OperatorTrigger = "operator"

// ActionVerb is the API verb an action needs on the lease.
func ActionVerb(action string) string {
	if action == ActionDelete {
		return "delete"
	}
	return "patch"
}

// ActionPath parses /ui/api/v1/namespaces/<ns>/leases/<name>/actions/<action>.
func ActionPath(p string) (namespace, name, action string, ok bool) {
	rest, found := strings.CutPrefix(p, "/ui/api/v1/")
	if !found {
		return "", "", "", false
	}
	seg := strings.Split(rest, "/")
	if len(seg) != 6 || seg[0] != "namespaces" || seg[2] != "leases" || seg[4] != "actions" || seg[1] == "" || seg[3] == "" {
		return "", "", "", false
	}
	switch seg[5] {
	case ActionRelease, ActionStepDown, ActionHandOver, ActionDelete:
		return seg[1], seg[3], seg[5], true
	}
	return "", "", "", false
}

// ActionRecord is the body of an action's record: what the page saw before
// it acted (Holder, UID) and the hand-over's target.
type ActionRecord struct {
	// Holder is the holder before the action, as the page showed it.
	Holder string `json:"holder,omitempty"`
	// Target is the candidate a hand-over names.
	Target string `json:"target,omitempty"`
	// UID is the deleted lease's uid: a lease of the same name created
	// since is not the one deleted.
	UID string `json:"uid,omitempty"`
}

// reacquireWindow is how recent an acquireTime must be for a released
// holder found holding the lease again to count as having re-acquired it.
const reacquireWindow = 30 * time.Second

// errNotDone is a record of an action the lease does not show.
var errNotDone = errors.New("the lease does not show this action")

func (h *Handler) serveAction(rc *fasthttp.RequestCtx, ns, name, action string) {
	if err := leaseNameError(ns, name); err != nil {
		h.writeError(rc, fasthttp.StatusNotFound, err)
		return
	}
	rec := h.opts.Sources.Decisions
	if h.opts.Engine == nil || rec == nil {
		h.writeError(rc, fasthttp.StatusNotImplemented, errors.New("this server keeps no decision history"))
		return
	}
	var in ActionRecord
	if err := json.Unmarshal(rc.PostBody(), &in); err != nil {
		h.writeError(rc, fasthttp.StatusBadRequest, fmt.Errorf("decoding the action: %w", err))
		return
	}
	in.Holder, in.Target = clip(in.Holder), clip(in.Target)
	if action == ActionHandOver && in.Target == "" {
		h.writeError(rc, fasthttp.StatusBadRequest, errors.New("a hand-over needs a target"))
		return
	}
	if action == ActionStepDown && in.Holder == "" {
		h.writeError(rc, fasthttp.StatusBadRequest, errors.New("a step-down needs the holder"))
		return
	}
	strategy, err := h.checkDone(rc, ns, name, action, in)
	if errors.Is(err, errNotDone) {
		h.writeError(rc, fasthttp.StatusConflict, err)
		return
	}
	if err != nil {
		h.writeError(rc, fasthttp.StatusInternalServerError, err)
		return
	}
	user := apiserver.Requester(rc).Name
	d := history.DecisionRecord{
		Time: time.Now(), Trigger: OperatorTrigger, Strategy: strategy, Holder: in.Holder, Chosen: in.Target,
		Action: action, Reason: operatorReason(user, action, in), Outcome: "ok",
		Module: history.DecisionModule{Name: "operator " + user},
	}
	if err := rec.RecordDecision(rc, ns, name, d, 0); err != nil {
		h.log.Warn("Recording an operator action failed", "namespace", ns, "lease", name, "action", action, "user", user, "err", err)
		h.writeError(rc, fasthttp.StatusInternalServerError, err)
		return
	}
	h.log.Info("Operator action", "namespace", ns, "lease", name, "action", action, "user", user, "target", in.Target)
	rc.SetStatusCode(fasthttp.StatusCreated)
	h.writeJSON(rc, d)
}

func operatorReason(user, action string, in ActionRecord) string {
	switch action {
	case ActionRelease:
		return fmt.Sprintf("%s force-released the lease from the web UI", user)
	case ActionStepDown:
		return fmt.Sprintf("%s asked %s to step down from the web UI", user, in.Holder)
	case ActionHandOver:
		return fmt.Sprintf("%s handed the lease over to %s from the web UI", user, in.Target)
	}
	return fmt.Sprintf("%s deleted the lease from the web UI", user)
}

// checkDone reports whether the lease shows the action done (errNotDone
// if not) and returns its strategy. A hand-over counts as done while the
// target is preferred or already holds the lease: the controller may
// have completed it before the record arrives.
func (h *Handler) checkDone(ctx context.Context, ns, name, action string, in ActionRecord) (string, error) {
	res, ok := h.opts.Engine.ResourceFor(engine.GroupName, "v1", "leases")
	if !ok {
		return "", errors.New("the engine serves no leases v1")
	}
	obj, err := h.opts.Engine.Get(ctx, engine.Scope{Resource: res, Version: "v1", Namespace: ns, UserAgent: "leasehold-ui"}, name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if action == ActionDelete {
			return "", nil
		}
		return "", fmt.Errorf("%w: lease %s/%s does not exist", errNotDone, ns, name)
	}
	if err != nil {
		return "", fmt.Errorf("reading lease %s/%s: %w", ns, name, err)
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return "", fmt.Errorf("reading lease %s/%s: unexpected %T", ns, name, obj)
	}
	strategy := ""
	if l.Spec.Strategy != nil {
		strategy = string(*l.Spec.Strategy)
	}
	holder, preferred := holderOf(l), ""
	if l.Spec.PreferredHolder != nil {
		preferred = *l.Spec.PreferredHolder
	}
	switch action {
	case ActionDelete:
		if in.UID == "" || string(l.UID) == in.UID {
			return "", fmt.Errorf("%w: lease %s/%s still exists", errNotDone, ns, name)
		}
	case ActionRelease:
		// The holder may already be elected again (a coordinated lease)
		// or have re-acquired it: what counts is that the one released
		// lost it at some point, so only "still the same tenure" refuses.
		if holder != "" && holder == in.Holder && l.Spec.AcquireTime != nil && time.Since(l.Spec.AcquireTime.Time) > reacquireWindow {
			return "", fmt.Errorf("%w: %s still holds lease %s/%s", errNotDone, holder, ns, name)
		}
	case ActionStepDown:
		// Done while the request stands, or once the holder has gone (it
		// may have stepped down, clearing the annotation, before this
		// record arrives) or came back for a new term.
		if holder == in.Holder && l.Annotations[AnnotationStepDown] != in.Holder && l.Spec.AcquireTime != nil && time.Since(l.Spec.AcquireTime.Time) > reacquireWindow {
			return "", fmt.Errorf("%w: lease %s/%s does not ask %s to step down", errNotDone, ns, name, holder)
		}
	case ActionHandOver:
		if preferred != in.Target && holder != in.Target {
			return "", fmt.Errorf("%w: lease %s/%s neither prefers nor is held by %s", errNotDone, ns, name, in.Target)
		}
	}
	return strategy, nil
}
