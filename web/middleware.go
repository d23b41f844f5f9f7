package web

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/web/apiserver"
	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/flowcontrol"
	"github.com/leasehold/leasehold/web/ui"
)

// serve is the root handler, kube-apiserver's filter chain in its order:
// audit ID and cache control, panic recovery, authentication,
// authorization, priority and fairness (web/flowcontrol; health checks
// are exempt) and the watch limits, then the endpoints; the access log
// line and the request metrics are written last.
func (s *Server) serve(rc *fasthttp.RequestCtx) {
	start := time.Now()
	s.requests.Add(1)
	s.begin(rc)
	info := requestInfo(rc)
	user := auth.Anonymous
	defer func() { applyClose(rc); s.logRequest(rc, &info, &user, start) }()
	defer s.recoverPanic(rc)

	if conflictingFraming(rc) {
		closeAfterResponse(rc)
		rc.Error("400 Bad Request: both Content-Length and Transfer-Encoding", fasthttp.StatusBadRequest)
		return
	}
	if !s.authn.Enabled() {
		// No credentials: keep web pages out (browserguard.go).
		if err := s.browserGuard(rc, info.Path); err != nil {
			discardBody(rc, drainBytes)
			s.api.WriteError(rc, err)
			return
		}
	}
	// The join is authenticated by the cluster token (serveClusterJoin);
	// being public, it passes its own rate limits first (gateJoin).
	joining := s.join != nil && isJoinPath(info.Path)
	if joining && !s.gateJoin(rc) {
		return
	}
	public := isHealthPath(info.Path) || ui.Public(rc) || joining
	if !public && s.authn.Enabled() {
		u, err := s.authn.Authenticate(rc.Request.Header.Peek("Authorization"), rc.TLSConnectionState())
		if err != nil {
			user = auth.User{}
			discardBody(rc, drainBytes)
			s.api.WriteError(rc, auth.Unauthorized())
			return
		}
		user = u
		apiserver.SetUser(rc, u)
	}
	if !routablePath(rc) {
		discardBody(rc, drainBytes)
		s.notFound(rc)
		return
	}
	if !public && s.authn.Enabled() && s.authz != nil && !auth.IsSelfReview(info) && !s.authorize(rc, user, info) {
		return
	}
	// Flow control (priority and fairness) admits the request before its
	// body is read, so a queued request holds no body memory.
	var ticket *flowcontrol.Ticket
	streamed := false // a LIST's byte budget went to its response stream
	watching := false // a watch's seats went to its stream, until its initial events are written
	if !isHealthPath(info.Path) {
		fr := flowRequest(rc, &info, &user)
		t, err := s.flow.Admit(context.Background(), &fr)
		if err != nil {
			discardBody(rc, drainBytes)
			s.tooManyRequests(rc, err)
			return
		}
		ticket = t
		defer func() {
			if !watching {
				ticket.Done()
			}
		}()
		// A LIST's byte budget is held until its response is written
		// (holdListBytes), or given back here if it never got that far.
		defer func() {
			if !streamed {
				ticket.ReleaseBytes()
			}
		}()
	}
	// Only now, authenticated, authorized and admitted, is the body read.
	held, err := s.readBody(rc)
	defer s.bodies.give(held)
	if err != nil {
		s.answerBodyError(rc, err)
		return
	}
	switch {
	case info.Verb == "watch" && info.IsResourceRequest:
		release, ok := s.limits.acquireWatch(user.Name, rc.RemoteIP().String())
		if !ok {
			tooManyRequests(rc)
			return
		}
		ended := s.metrics.WatchStarted()
		done := func() { release(); ended() }
		apiserver.OnStreamEnd(rc, done)
		if ticket != nil {
			apiserver.OnInitialEvents(rc, ticket.Done)
		}
		s.route(rc)
		if !rc.Response.IsBodyStream() {
			done() // the watch failed before streaming
		} else {
			watching = true
		}
	default:
		// Operator writes to a lease are recorded as the server performs
		// them (ui/leasewrites.go).
		recorded := s.ui.ObserveLeaseWrite(rc)
		drained := s.observeCandidateDrain(rc)
		s.route(rc)
		recorded()
		drained()
		if ticket != nil && ticket.HoldsBytes() {
			streamed = holdListBytes(rc, ticket)
		}
	}
}

// authorize reports whether user may make the request info describes,
// and answers 403 when not.
func (s *Server) authorize(rc *fasthttp.RequestCtx, user auth.User, info auth.RequestInfo) bool {
	allowed, reason := s.authz.Authorize(user, info)
	if allowed && isAdminPath(info.Path) {
		// Admin endpoints reveal or replace every namespace's objects:
		// the path being allowed is not enough.
		allowed, reason = s.authz.Authorize(user, readEverything)
		if !allowed {
			reason = "admin endpoints need a policy that may read every resource in every namespace"
		}
	}
	if !allowed {
		discardBody(rc, drainBytes)
		s.api.WriteError(rc, auth.Forbidden(user, info, reason))
	}
	return allowed
}

// requestInfo is what authorization and the access log see of a request:
// kube-apiserver's RequestInfo for the API and other paths, for the UI's
// decision history the subresource "decisions" of the lease it belongs to,
// and for the record of an operator action the action's own verb on the
// lease.
func requestInfo(rc *fasthttp.RequestCtx) auth.RequestInfo {
	path := string(rc.Path())
	if ns, name, ok := ui.DecisionsPath(path); ok {
		verb := strings.ToLower(string(rc.Method()))
		if rc.IsGet() || rc.IsHead() {
			verb = "get"
		}
		return auth.RequestInfo{IsResourceRequest: true, Path: path, Verb: verb,
			APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Subresource: "decisions",
			Namespace: ns, Name: name}
	}
	if ri, ok := drainRequestInfo(rc, path); ok {
		return ri
	}
	if path == ui.TransitionsPath {
		return auth.RequestInfo{IsResourceRequest: true, Path: path, Verb: "list",
			APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Subresource: "decisions"}
	}
	if ns, name, action, ok := ui.ActionPath(path); ok {
		// Recording an operator action is allowed to whoever may do the
		// action itself: the same verb on the same lease.
		verb := ui.ActionVerb(action)
		if !rc.IsPost() {
			verb = strings.ToLower(string(rc.Method()))
		}
		return auth.RequestInfo{IsResourceRequest: true, Path: path, Verb: verb,
			APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: ns, Name: name}
	}
	if ns, name, ok := ui.PreviewPath(path); ok {
		// Previewing a hand-over is allowed to whoever may hand the lease
		// over: patch it.
		verb := "patch"
		if !rc.IsPost() {
			verb = strings.ToLower(string(rc.Method()))
		}
		return auth.RequestInfo{IsResourceRequest: true, Path: path, Verb: verb,
			APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: ns, Name: name}
	}
	return auth.NewRequestInfo(string(rc.Method()), path, rc.QueryArgs())
}

// readEverything is what a user must be allowed to do to use an admin
// endpoint: read every resource of every group in every namespace, the
// reach of cluster-admin's read side.
var readEverything = auth.RequestInfo{IsResourceRequest: true, Verb: "get",
	APIGroup: "*", APIVersion: "*", Namespace: "*", Resource: "*", Name: "*"}

// isAdminPath reports the endpoints that read or replace the whole
// database.
func isAdminPath(p string) bool {
	return p == backupPath || strings.HasPrefix(p, "/leasehold/") && !isDrainPath(p)
}

// isHealthPath reports the health endpoints, which are public: probes
// carry no credentials, and they reveal no data (failure reasons are
// withheld).
func isHealthPath(p string) bool {
	for _, e := range [...]string{"/healthz", "/livez", "/readyz"} {
		if p == e || (strings.HasPrefix(p, e) && p[len(e)] == '/') {
			return true
		}
	}
	return false
}

// route dispatches by path.
func (s *Server) route(rc *fasthttp.RequestCtx) {
	switch p := string(rc.Path()); {
	case p == "/healthz" || p == "/livez" || p == "/readyz":
		s.serveHealth(rc, p[1:], "")
	case strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/"):
		if name, check, ok := splitCheckPath(p); ok {
			s.serveHealth(rc, name, check)
			return
		}
		notFound(rc)
	case p == "/version" || p == "/version/":
		s.serveVersion(rc)
	case p == "/metrics":
		s.serveMetrics(rc)
	case p == backupPath && s.backup != nil:
		s.serveBackup(rc)
	case p == snapshotsPath && s.snapshots != nil:
		s.serveSnapshots(rc)
	case s.cluster != nil && (p == clusterPath || strings.HasPrefix(p, clusterPath+"/")):
		s.serveCluster(rc, p)
	case isDrainPath(p):
		s.serveDrains(rc, p)
	default:
		if s.ui.Serve(rc) { // /ui/..., and / for browsers
			return
		}
		if !s.api.Serve(rc) {
			notFound(rc)
		}
	}
}

// begin sets the headers every response carries: Audit-Id, the default
// Cache-Control (handlers may override it, as discovery does), nosniff,
// and over TLS HSTS (browsers then never downgrade to plain HTTP).
func (s *Server) begin(rc *fasthttp.RequestCtx) {
	h := &rc.Response.Header
	id := s.ids.next()
	// Canonical keys and byte values: Set would normalise each key and
	// convert each value on every request.
	h.SetCanonical(headerAuditID, id[:])
	h.SetCanonical(headerCacheControl, valueNoCache)
	h.SetCanonical(headerContentTypeOptions, valueNoSniff)
	if s.tls != nil {
		h.SetCanonical(headerHSTS, valueHSTS)
	}
}

var (
	headerAuditID            = []byte("Audit-Id")
	headerCacheControl       = []byte("Cache-Control")
	headerContentTypeOptions = []byte("X-Content-Type-Options")
	headerHSTS               = []byte("Strict-Transport-Security")
	valueNoCache             = []byte("no-cache, private")
	valueNoSniff             = []byte("nosniff")
	valueHSTS                = []byte("max-age=31536000")
)

// recoverPanic turns a handler panic into a logged 500 Status so that bad
// input can never take the server down.
func (s *Server) recoverPanic(rc *fasthttp.RequestCtx) {
	v := recover()
	if v == nil {
		return
	}
	id := string(rc.Response.Header.Peek("Audit-Id"))
	s.log.Error("Recovered from a panic while serving a request",
		slog.String("requestID", id), slog.String("method", string(rc.Method())),
		slog.String("path", string(rc.Path())), slog.String("panic", fmt.Sprint(v)),
		slog.String("stack", string(debug.Stack())))
	rc.Response.Reset()
	s.begin(rc)
	rc.Response.Header.Set("Audit-Id", id)
	s.api.WriteError(rc, fmt.Errorf("panic: %v", v))
}

// notFound is kube-apiserver's answer for a path that names nothing: a
// 404 Status under /api and /apis, Go's http.NotFound elsewhere.
func (s *Server) notFound(rc *fasthttp.RequestCtx) {
	if apiserver.IsAPIPath(string(rc.Path())) {
		s.api.NotFound(rc)
		return
	}
	notFound(rc)
}

// notFound is Go's http.NotFound, which kube-apiserver answers for paths
// outside every API group.
func notFound(rc *fasthttp.RequestCtx) {
	rc.Response.Header.Set("X-Content-Type-Options", "nosniff")
	rc.SetContentType("text/plain; charset=utf-8")
	rc.SetStatusCode(fasthttp.StatusNotFound)
	rc.SetBodyString("404 page not found\n")
}

// auditIDs generates Audit-Id values: UUID-shaped (version 4 bits set),
// a random per-process prefix plus a counter. Unique within the process
// and across restarts, without a crypto/rand read per request.
type auditIDs struct {
	prefix [8]byte
	n      *atomic.Uint64
}

func newAuditIDs() auditIDs {
	a := auditIDs{n: new(atomic.Uint64)}
	_, _ = rand.Read(a.prefix[:])
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	a.n.Store(binary.BigEndian.Uint64(seed[:]))
	return a
}

func (a auditIDs) next() [36]byte {
	var u [16]byte
	copy(u[:8], a.prefix[:])
	binary.BigEndian.PutUint64(u[8:], a.n.Add(1))
	u[6] = (u[6] & 0x0f) | 0x40 // version 4
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return b
}
