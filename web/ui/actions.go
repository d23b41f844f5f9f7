package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/engine/election"
)

// Operator actions. The page does each one through the Kubernetes API with
// the user's own token, exactly as kubectl would (a merge patch or a
// DELETE), so it meets the same authorization. The server records the
// action in the lease's decision history as it performs the write
// (leasewrites.go), with the name the request was authenticated as and
// the lease as the server saw it before and after: no client assertion
// goes into a record. The page then asks for the record of its action at
// the action endpoint, which answers 409 when the server performed no
// such write for this user on this lease.
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

// ActionRecord is the body the page sends with its claim. It is no longer
// trusted: the record holds what the server saw. Kept so that older pages
// still decode.
type ActionRecord struct {
	Holder string `json:"holder,omitempty"`
	Target string `json:"target,omitempty"`
	UID    string `json:"uid,omitempty"`
}

// serveAction answers the page's request for the record of its action:
// 201 with the record the server wrote when it performed the write, 409
// when it performed none (for this user, lease and action, in the last
// observedTTL).
func (h *Handler) serveAction(rc *fasthttp.RequestCtx, ns, name, action string) {
	if err := leaseNameError(ns, name); err != nil {
		h.writeError(rc, fasthttp.StatusNotFound, err)
		return
	}
	if h.opts.Engine == nil || h.opts.Sources.Decisions == nil {
		h.writeError(rc, fasthttp.StatusNotImplemented, errors.New("this server keeps no decision history"))
		return
	}
	var in ActionRecord
	if err := json.Unmarshal(rc.PostBody(), &in); err != nil {
		h.writeError(rc, fasthttp.StatusBadRequest, fmt.Errorf("decoding the action: %w", err))
		return
	}
	if action == ActionHandOver && in.Target == "" {
		h.writeError(rc, fasthttp.StatusBadRequest, errors.New("a hand-over needs a target"))
		return
	}
	who := actor(rc)
	d, ok := h.writes.take(observedKey(who, ns, name, action))
	if !ok {
		h.writeError(rc, fasthttp.StatusConflict, fmt.Errorf("the server performed no %s of lease %s/%s by %s: only a write it performed is recorded", action, ns, name, who))
		return
	}
	rc.SetStatusCode(fasthttp.StatusCreated)
	h.writeJSON(rc, d)
}

// PreviewPath parses the path of a hand-over preview,
// /ui/api/v1/namespaces/<ns>/leases/<name>/handover-preview. The server
// authorizes it as the hand-over itself (patch of the lease): it runs the
// lease's strategy, and only who may hand the lease over needs to know
// what the strategy would do with it.
func PreviewPath(p string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(p, "/ui/api/v1/")
	if !found {
		return "", "", false
	}
	seg := strings.Split(rest, "/")
	if len(seg) == 5 && seg[0] == "namespaces" && seg[2] == "leases" && seg[4] == "handover-preview" && seg[1] != "" && seg[3] != "" {
		return seg[1], seg[3], true
	}
	return "", "", false
}

// PreviewRequest is the body of a hand-over preview.
type PreviewRequest struct {
	// Candidate is the identity the lease would be handed over to.
	Candidate string `json:"candidate"`
}

// previewTimeout bounds a preview: it waits for the election worker to
// finish the reconcile in hand, then for up to two decisions, each within
// the decision deadline (and its fallbacks').
const previewTimeout = 15 * time.Second

// servePreview answers a hand-over preview: 200 with what the election
// controller would do (election.HandOverPreview), 501 without a
// controller, 503 when it cannot tell now (in a cluster, the controller
// runs on one member at a time).
func (h *Handler) servePreview(rc *fasthttp.RequestCtx, ns, name string) {
	if err := leaseNameError(ns, name); err != nil {
		h.writeError(rc, fasthttp.StatusNotFound, err)
		return
	}
	if mt, _, _ := strings.Cut(string(rc.Request.Header.ContentType()), ";"); strings.TrimSpace(mt) != "application/json" {
		h.writeError(rc, fasthttp.StatusUnsupportedMediaType, errors.New("a hand-over preview is a JSON body (Content-Type: application/json)"))
		return
	}
	var in PreviewRequest
	if err := json.Unmarshal(rc.PostBody(), &in); err != nil {
		h.writeError(rc, fasthttp.StatusBadRequest, fmt.Errorf("decoding the preview request: %w", err))
		return
	}
	if in.Candidate == "" {
		h.writeError(rc, fasthttp.StatusBadRequest, errors.New("a hand-over preview needs a candidate"))
		return
	}
	src := h.opts.Sources.HandOverPreview
	if src == nil {
		h.writeError(rc, fasthttp.StatusNotImplemented, errors.New("this server runs no election controller"))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), previewTimeout)
	defer cancel()
	p, err := src(ctx, ns, name, in.Candidate)
	switch {
	case errors.Is(err, election.ErrPreviewUnavailable):
		h.writeError(rc, fasthttp.StatusServiceUnavailable, err)
		return
	case err != nil:
		h.log.Warn("Previewing a hand-over failed", "namespace", ns, "lease", name, "candidate", in.Candidate, "err", err)
		h.writeError(rc, fasthttp.StatusInternalServerError, err)
		return
	}
	h.writeJSON(rc, p)
}
