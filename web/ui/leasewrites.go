package ui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/web/apiserver"
	"github.com/leasehold/leasehold/web/auth"
)

// The decision history's operator records are written by the server when
// it performs an operator's write, from what it saw: the lease before and
// after, and who the request was authenticated as. A client cannot make
// it record an action that did not happen, a holder that never held the
// lease, or a deletion of a live lease. ObserveLeaseWrite is called by the
// web filter around every PATCH and DELETE of a lease (client-go's
// elections renew with PUT, which is not an operator action); the action
// endpoint only returns what was recorded.

// observedTTL is how long a recorded action stays claimable by the page
// that did it (the page asks right after its write).
const observedTTL = 2 * time.Minute

type observed struct {
	rec history.DecisionRecord
	at  time.Time
}

type writeLog struct {
	mu     sync.Mutex
	recent map[string]observed // who|ns|name|action
}

func observedKey(who, ns, name, action string) string {
	return who + "\x00" + ns + "\x00" + name + "\x00" + action
}

func (w *writeLog) put(key string, o observed) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.recent == nil {
		w.recent = map[string]observed{}
	}
	for k, v := range w.recent {
		if time.Since(v.at) > observedTTL {
			delete(w.recent, k)
		}
	}
	w.recent[key] = o
}

// take returns and forgets the recorded action.
func (w *writeLog) take(key string) (history.DecisionRecord, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.recent[key]
	if !ok || time.Since(o.at) > observedTTL {
		return history.DecisionRecord{}, false
	}
	delete(w.recent, key)
	return o.rec, true
}

// actor names who made a request for the record: the authenticated user,
// or for an anonymous one (a server without authentication) its address.
func actor(rc *fasthttp.RequestCtx) string {
	u := apiserver.Requester(rc)
	if u.Name == "" || u.Name == auth.AnonymousUser {
		return auth.AnonymousUser + "@" + rc.RemoteIP().String()
	}
	return u.Name
}

// leaseAPIPath parses /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME.
func leaseAPIPath(p string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(p, "/apis/"+engine.GroupName+"/v1/namespaces/")
	if !found {
		return "", "", false
	}
	seg := strings.Split(rest, "/")
	if len(seg) != 3 || seg[1] != "leases" || seg[0] == "" || seg[2] == "" {
		return "", "", false
	}
	return seg[0], seg[2], true
}

// ObserveLeaseWrite reads the lease a PATCH or DELETE is about to change
// and returns the function to call once the request was served: it
// records the operator actions the change amounts to (a release, a
// hand-over, a deletion) in the lease's decision history.
func (h *Handler) ObserveLeaseWrite(rc *fasthttp.RequestCtx) func() {
	nop := func() {}
	if h == nil || h.opts.Engine == nil || !(rc.IsPatch() || rc.IsDelete()) || len(rc.QueryArgs().Peek("dryRun")) > 0 {
		return nop
	}
	ns, name, ok := leaseAPIPath(string(rc.Path()))
	if !ok {
		return nop
	}
	rec := h.opts.Sources.Decisions
	if rec == nil {
		return nop
	}
	prev, err := h.lease(rc, ns, name)
	if err != nil || prev == nil {
		return nop
	}
	return func() {
		if code := rc.Response.StatusCode(); code < 200 || code > 299 {
			return
		}
		after, err := h.lease(rc, ns, name)
		if err != nil {
			return
		}
		via := "through the API"
		if string(rc.QueryArgs().Peek("fieldManager")) == "leasehold-ui" {
			via = "from the web UI" // cosmetic: who and what come from the server
		}
		who := actor(rc)
		strategy := ""
		if prev.Spec.Strategy != nil {
			strategy = string(*prev.Spec.Strategy)
		}
		record := func(action, holder, target, reason string) {
			d := history.DecisionRecord{
				Time: time.Now(), Trigger: OperatorTrigger, Strategy: strategy, Holder: holder, Chosen: target,
				Action: action, Reason: reason, Outcome: "ok",
				Module: history.DecisionModule{Name: "operator " + who},
			}
			if err := rec.RecordDecision(context.WithoutCancel(rc), ns, name, d, 0); err != nil {
				h.log.Warn("Recording an operator action failed", "namespace", ns, "lease", name, "action", action, "user", who, "err", err)
				return
			}
			h.log.Info("Operator action", "namespace", ns, "lease", name, "action", action, "user", who, "target", target)
			h.writes.put(observedKey(who, ns, name, action), observed{rec: d, at: time.Now()})
		}
		holder := clip(holderOf(prev))
		if rc.IsDelete() {
			if after == nil || after.UID != prev.UID {
				record(ActionDelete, holder, "", fmt.Sprintf("%s deleted the lease %s", who, via))
			}
			return
		}
		if after == nil || after.UID != prev.UID {
			return
		}
		if holder != "" && holderOf(after) == "" {
			record(ActionRelease, holder, "", fmt.Sprintf("%s force-released the lease %s", who, via))
		}
		if asked := after.Annotations[AnnotationStepDown]; asked != "" && asked != prev.Annotations[AnnotationStepDown] {
			record(ActionStepDown, clip(asked), "", fmt.Sprintf("%s asked %s to step down %s", who, clip(asked), via))
		}
		before, now := preferredOf(prev), preferredOf(after)
		if now != "" && now != before {
			record(ActionHandOver, holder, clip(now), fmt.Sprintf("%s handed the lease over to %s %s", who, clip(now), via))
		}
	}
}

func preferredOf(l *coordinationv1.Lease) string {
	if l.Spec.PreferredHolder == nil {
		return ""
	}
	return *l.Spec.PreferredHolder
}

// lease reads a lease as the server sees it; nil when there is none.
func (h *Handler) lease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	res, ok := h.opts.Engine.ResourceFor(engine.GroupName, "v1", "leases")
	if !ok {
		return nil, fmt.Errorf("the engine serves no leases v1")
	}
	obj, err := h.opts.Engine.Get(ctx, engine.Scope{Resource: res, Version: "v1", Namespace: ns, UserAgent: "leasehold-ui"}, name, &metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, fmt.Errorf("lease %s/%s: unexpected %T", ns, name, obj)
	}
	return l, nil
}
