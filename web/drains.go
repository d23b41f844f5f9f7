package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/web/apiserver"
	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/ui"
)

// Drains: maintenance mode for an identity (engine/election's drain.go).
// The server keeps a record per namespace and identity, written here as
// the server performs a drain or undrain, with the name the request was
// authenticated as: `leasehold drain`, the web UI and anyone else use
//
//	GET    /leasehold/v1/drains                                    every drain
//	GET    /leasehold/v1/namespaces/NS/drains                      a namespace's
//	GET    /leasehold/v1/namespaces/NS/drains/IDENTITY             one (404: not drained)
//	PUT    /leasehold/v1/namespaces/NS/drains/IDENTITY[?force=true] drain (201, 200 if already; 409 refused)
//	DELETE /leasehold/v1/namespaces/NS/drains/IDENTITY             undrain (200, 404 if not drained)
//
// IDENTITY is path-escaped (an identity may hold any character).
// Authorization treats a drain as the subresource "drain" of the
// LeaseCandidate named IDENTITY (coordination.k8s.io): reading it needs
// get (list for the lists), changing it update. The annotation
// AnnotationDrain on a LeaseCandidate does the same, the kubectl way
// (observeCandidateDrain).
const (
	drainsPath   = "/leasehold/v1/drains"
	drainsNSPath = "/leasehold/v1/namespaces/"
)

// Drains is the store of drain records the server reads and writes
// (engine/history's Store), and records the actions in the decision
// history of the leases they concern.
type Drains interface {
	Drain(ctx context.Context, rec history.DrainRecord) (history.DrainRecord, bool, error)
	Undrain(ctx context.Context, ns, identity string) (history.DrainRecord, bool, error)
	DrainOf(ctx context.Context, ns, identity string) (history.DrainRecord, bool, error)
	Drains(ctx context.Context, ns string) ([]history.DrainRecord, error)
	RecordDecision(ctx context.Context, ns, name string, rec history.DecisionRecord, keep int) error
}

// drainsResource names drains in Status errors.
var drainsResource = schema.GroupResource{Group: "leasehold.dev", Resource: "drains"}

// DrainView is a drain record as the API answers it.
type DrainView struct {
	Kind string `json:"kind"`
	history.DrainRecord
}

// DrainList is the answer of the list endpoints. Available is false
// from a server that keeps no drains (then every other drain request is
// 404), so that the web UI offers no Drain there.
type DrainList struct {
	Kind      string      `json:"kind"`
	Available bool        `json:"available"`
	Items     []DrainView `json:"items"`
}

// drainPath parses the drain paths: all for /leasehold/v1/drains, a
// namespace's list without identity, or one identity.
func drainPath(p string) (ns, identity string, all, ok bool) {
	if p == drainsPath {
		return "", "", true, true
	}
	rest, found := strings.CutPrefix(p, drainsNSPath)
	if !found {
		return "", "", false, false
	}
	ns, rest, found = strings.Cut(rest, "/")
	if !found || ns == "" {
		return "", "", false, false
	}
	if rest == "drains" {
		return ns, "", false, true
	}
	identity, found = strings.CutPrefix(rest, "drains/")
	if !found || identity == "" {
		return "", "", false, false
	}
	return ns, identity, false, true
}

// isDrainPath reports the drain endpoints (which are not admin endpoints).
func isDrainPath(p string) bool {
	_, _, _, ok := drainPath(p)
	return ok
}

// drainRequestInfo is what authorization sees of a drain request.
func drainRequestInfo(rc *fasthttp.RequestCtx, path string) (auth.RequestInfo, bool) {
	ns, identity, all, ok := drainPath(path)
	if !ok {
		return auth.RequestInfo{}, false
	}
	verb := "update"
	switch {
	case (rc.IsGet() || rc.IsHead()) && identity == "":
		verb = "list"
	case rc.IsGet() || rc.IsHead():
		verb = "get"
	}
	if all {
		ns = ""
	}
	return auth.RequestInfo{IsResourceRequest: true, Path: path, Verb: verb, APIGroup: engine.GroupName, APIVersion: "v1beta1",
		Resource: "leasecandidates", Subresource: "drain", Namespace: ns, Name: identity}, true
}

// serveDrains answers the drain endpoints.
func (s *Server) serveDrains(rc *fasthttp.RequestCtx, p string) {
	ns, identity, all, _ := drainPath(p)
	ctx := context.WithoutCancel(rc)
	if s.drains == nil {
		if identity == "" && rc.IsGet() {
			writeJSON(rc, DrainList{Kind: "DrainList", Items: []DrainView{}})
			return
		}
		notFound(rc)
		return
	}
	if identity == "" {
		if !rc.IsGet() {
			s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
			return
		}
		if all {
			ns = ""
		}
		recs, err := s.drains.Drains(ctx, ns)
		if err != nil {
			s.api.WriteError(rc, apierrors.NewInternalError(err))
			return
		}
		list := DrainList{Kind: "DrainList", Available: true, Items: make([]DrainView, 0, len(recs))}
		for _, r := range recs {
			list.Items = append(list.Items, DrainView{Kind: "Drain", DrainRecord: r})
		}
		writeJSON(rc, list)
		return
	}
	if err := history.CheckIdentity(ns, identity); err != nil {
		s.api.WriteError(rc, apierrors.NewBadRequest(err.Error()))
		return
	}
	switch {
	case rc.IsGet():
		rec, found, err := s.drains.DrainOf(ctx, ns, identity)
		switch {
		case err != nil:
			s.api.WriteError(rc, apierrors.NewInternalError(err))
		case !found:
			s.api.WriteError(rc, apierrors.NewNotFound(drainsResource, identity))
		default:
			writeJSON(rc, DrainView{Kind: "Drain", DrainRecord: rec})
		}
	case rc.IsPut() || rc.IsPost():
		force, _ := strconv.ParseBool(string(rc.QueryArgs().Peek("force")))
		rec, created, err := s.drain(ctx, rc, ns, identity, force, drainVia(rc))
		if err != nil {
			s.api.WriteError(rc, err)
			return
		}
		if created {
			rc.SetStatusCode(fasthttp.StatusCreated)
		}
		writeJSON(rc, DrainView{Kind: "Drain", DrainRecord: rec})
	case rc.IsDelete():
		rec, found, err := s.undrain(ctx, rc, ns, identity, drainVia(rc))
		switch {
		case err != nil:
			s.api.WriteError(rc, err)
		case !found:
			s.api.WriteError(rc, apierrors.NewNotFound(drainsResource, identity))
		default:
			writeJSON(rc, DrainView{Kind: "Drain", DrainRecord: rec})
		}
	default:
		s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
	}
}

// drainVia names the client for the record, from the fieldManager it
// sends as kubectl's writes do: cosmetic, who and what come from the
// server.
func drainVia(rc *fasthttp.RequestCtx) string {
	switch string(rc.QueryArgs().Peek("fieldManager")) {
	case "leasehold-ui":
		return "the web UI"
	case "leasehold-drain":
		return "leasehold drain"
	}
	return "the drain API"
}

// drain drains ns/identity for the request's user, unless that leaves a
// lease without a live candidate and force is not set (409), and records
// it in the decision history of every lease the identity stands for or
// holds.
func (s *Server) drain(ctx context.Context, rc *fasthttp.RequestCtx, ns, identity string, force bool, via string) (history.DrainRecord, bool, error) {
	if old, found, err := s.drains.DrainOf(ctx, ns, identity); err != nil {
		return history.DrainRecord{}, false, apierrors.NewInternalError(err)
	} else if found {
		return old, false, nil
	}
	cands, leases, err := s.drainScope(ctx, ns, identity)
	if err != nil {
		return history.DrainRecord{}, false, apierrors.NewInternalError(err)
	}
	if !force {
		recs, err := s.drains.Drains(ctx, ns)
		if err != nil {
			return history.DrainRecord{}, false, apierrors.NewInternalError(err)
		}
		drained := map[string]bool{}
		for _, r := range recs {
			drained[r.Identity] = true
		}
		if err := election.CheckDrain(cands, drained, identity, time.Now(), election.DefaultCandidateValidity, election.DefaultPingWindow); err != nil {
			return history.DrainRecord{}, false, apierrors.NewConflict(drainsResource, identity, err)
		}
	}
	who := ui.Actor(rc)
	rec, created, err := s.drains.Drain(ctx, history.DrainRecord{Namespace: ns, Identity: identity, By: who,
		Time: time.Now().UTC(), Via: via, Forced: force})
	if err != nil {
		return history.DrainRecord{}, false, apierrors.NewInternalError(err)
	}
	if created {
		what := fmt.Sprintf("%s drained %s through %s", who, identity, via)
		if force {
			what += " (forced)"
		}
		s.log.Info("Drained an identity", "namespace", ns, "identity", identity, "user", who, "via", via, "forced", force)
		s.recordDrain(ctx, ns, leases, ui.ActionDrain, identity, what)
	}
	return rec, created, nil
}

// undrain removes the drain of ns/identity and records it.
func (s *Server) undrain(ctx context.Context, rc *fasthttp.RequestCtx, ns, identity, via string) (history.DrainRecord, bool, error) {
	rec, found, err := s.drains.Undrain(ctx, ns, identity)
	if err != nil {
		return history.DrainRecord{}, false, apierrors.NewInternalError(err)
	}
	if !found {
		return rec, false, nil
	}
	who := ui.Actor(rc)
	s.log.Info("Undrained an identity", "namespace", ns, "identity", identity, "user", who, "via", via)
	if _, leases, err := s.drainScope(ctx, ns, identity); err == nil {
		s.recordDrain(ctx, ns, leases, ui.ActionUndrain, identity, fmt.Sprintf("%s undrained %s through %s", who, identity, via))
	}
	return rec, true, nil
}

// drainScope reads the namespace's candidates and the leases identity
// stands for (as a LeaseCandidate) or holds.
func (s *Server) drainScope(ctx context.Context, ns, identity string) ([]coordinationv1beta1.LeaseCandidate, []string, error) {
	set := map[string]bool{}
	cr, ok := s.eng.ResourceFor(engine.GroupName, "v1beta1", "leasecandidates")
	if !ok {
		return nil, nil, errors.New("the engine serves no leasecandidates v1beta1")
	}
	o, err := s.eng.List(ctx, engine.Scope{Resource: cr, Version: "v1beta1", Namespace: ns, UserAgent: "leasehold-drain"}, &metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	cl, _ := o.(*coordinationv1beta1.LeaseCandidateList)
	var cands []coordinationv1beta1.LeaseCandidate
	if cl != nil {
		cands = cl.Items
	}
	for _, c := range cands {
		if c.Name == identity {
			set[c.Spec.LeaseName] = true
		}
	}
	if lr, ok := s.eng.ResourceFor(engine.GroupName, "v1", "leases"); ok {
		o, err := s.eng.List(ctx, engine.Scope{Resource: lr, Version: "v1", Namespace: ns, UserAgent: "leasehold-drain"}, &metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		if ll, ok := o.(*coordinationv1.LeaseList); ok {
			for _, l := range ll.Items {
				if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
					set[l.Name] = true
				}
			}
		}
	}
	leases := make([]string, 0, len(set))
	for l := range set {
		leases = append(leases, l)
	}
	sort.Strings(leases)
	return cands, leases, nil
}

// recordDrain writes the operator record of a drain or undrain into the
// decision history of each lease: the UI shows who drained whom there.
func (s *Server) recordDrain(ctx context.Context, ns string, leases []string, action, identity, reason string) {
	who, _, _ := strings.Cut(reason, " ")
	for _, l := range leases {
		d := history.DecisionRecord{Time: time.Now().UTC(), Trigger: ui.OperatorTrigger, Chosen: identity,
			Action: action, Reason: reason, Outcome: "ok", Module: history.DecisionModule{Name: "operator " + who}}
		if err := s.drains.RecordDecision(ctx, ns, l, d, 0); err != nil {
			s.log.Warn("Recording a drain failed", "namespace", ns, "lease", l, "identity", identity, "err", err)
		}
	}
}

// candidateWrite parses /apis/coordination.k8s.io/VERSION/namespaces/NS/leasecandidates[/NAME].
func candidateWrite(p string) (version, ns, name string, ok bool) {
	rest, found := strings.CutPrefix(p, "/apis/"+engine.GroupName+"/")
	if !found {
		return "", "", "", false
	}
	seg := strings.Split(rest, "/")
	switch {
	case len(seg) == 4 && seg[1] == "namespaces" && seg[3] == "leasecandidates":
		return seg[0], seg[2], "", seg[2] != ""
	case len(seg) == 5 && seg[1] == "namespaces" && seg[3] == "leasecandidates":
		return seg[0], seg[2], seg[4], seg[2] != "" && seg[4] != ""
	}
	return "", "", "", false
}

// drainAnnotation is the value of AnnotationDrain on lc, "" when absent.
func drainAnnotation(lc *coordinationv1beta1.LeaseCandidate) string {
	if lc == nil {
		return ""
	}
	return lc.Annotations[election.AnnotationDrain]
}

// observeCandidateDrain reads the LeaseCandidate a write is about to
// change and returns the function to call once the request was served:
// when the write set AnnotationDrain to "true" (or "force") the
// candidate's identity is drained by the request's user, and when it
// set it to "false" or removed a "true" it is undrained. A drain the
// server refuses (the only live candidate of a lease) is not recorded:
// the answer carries a Warning, as admission warnings do, which kubectl
// prints. A re-created candidate without the annotation changes nothing:
// the drain is the identity's.
func (s *Server) observeCandidateDrain(rc *fasthttp.RequestCtx) func() {
	nop := func() {}
	if s.drains == nil || !(rc.IsPatch() || rc.IsPut() || rc.IsPost()) || len(rc.QueryArgs().Peek("dryRun")) > 0 {
		return nop
	}
	_, ns, name, ok := candidateWrite(string(rc.Path()))
	if !ok || (name == "") != rc.IsPost() {
		return nop
	}
	cr, ok := s.eng.ResourceFor(engine.GroupName, "v1beta1", "leasecandidates")
	if !ok {
		return nop
	}
	sc := engine.Scope{Resource: cr, Version: "v1beta1", Namespace: ns, UserAgent: "leasehold-drain"}
	get := func(name string) *coordinationv1beta1.LeaseCandidate {
		o, err := s.eng.Get(context.WithoutCancel(rc), sc, name, &metav1.GetOptions{})
		if err != nil {
			return nil
		}
		lc, _ := o.(*coordinationv1beta1.LeaseCandidate)
		return lc
	}
	// Only a body that names the annotation can set it (a JSON patch
	// escapes its slash), and only a PUT can drop it without naming it:
	// a candidate's renewal costs no read unless its identity carries
	// the annotation.
	body := rc.PostBody()
	names := bytes.Contains(body, []byte(election.AnnotationDrain)) || bytes.Contains(body, []byte("leasehold.dev~1drain"))
	if !names && !rc.IsPut() {
		return nop
	}
	var before string
	if name != "" {
		before = drainAnnotation(get(name))
	}
	if !names && before == "" {
		return nop
	}
	return func() {
		if code := rc.Response.StatusCode(); code < 200 || code > 299 {
			return
		}
		if name == "" {
			// A create: the new object's name is in the answer.
			var meta struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if json.Unmarshal(rc.Response.Body(), &meta) != nil || meta.Metadata.Name == "" {
				return
			}
			name = meta.Metadata.Name
		}
		after := drainAnnotation(get(name))
		if after == before {
			return
		}
		ctx := context.WithoutCancel(rc)
		via := "annotation on LeaseCandidate " + name
		switch {
		case after == "true" || after == "force":
			if _, _, err := s.drain(ctx, rc, ns, name, after == "force", via); err != nil {
				msg := err.Error()
				if se, ok := err.(apierrors.APIStatus); ok {
					msg = se.Status().Message
				}
				rc.Response.Header.Add("Warning", `299 - `+strconv.Quote("leasehold: not drained: "+msg+` (annotate `+election.AnnotationDrain+`=force to force it)`))
				s.log.Warn("Drain by annotation refused", "namespace", ns, "identity", name, "user", ui.Actor(rc), "err", err)
			}
		case after == "false" || before == "true" || before == "force":
			if _, _, err := s.undrain(ctx, rc, ns, name, via); err != nil {
				s.log.Warn("Undrain by annotation failed", "namespace", ns, "identity", name, "err", err)
			}
		}
	}
}
