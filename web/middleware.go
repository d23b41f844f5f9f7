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
)

// serve is the root handler: kube-apiserver's generic filters (audit ID,
// cache control, panic recovery), then the endpoints.
func (s *Server) serve(rc *fasthttp.RequestCtx) {
	var start time.Time
	logging := s.log.Enabled(context.Background(), slog.LevelDebug)
	if logging {
		start = time.Now()
	}
	s.begin(rc)
	defer s.recoverPanic(rc)
	s.route(rc)
	if logging {
		s.log.LogAttrs(context.Background(), slog.LevelDebug, "Served request",
			slog.String("requestID", string(rc.Response.Header.Peek("Audit-Id"))),
			slog.String("method", string(rc.Method())),
			slog.String("uri", string(rc.RequestURI())),
			slog.Int("status", rc.Response.StatusCode()),
			slog.Duration("duration", time.Since(start)),
			slog.String("userAgent", string(rc.UserAgent())))
	}
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
	default:
		if s.ui.Serve(rc) { // /ui/..., and / for browsers
			return
		}
		if !s.api.Serve(rc) {
			notFound(rc)
		}
	}
}

// begin sets the headers every response carries: Audit-Id and the
// default Cache-Control (handlers may override it, as discovery does).
func (s *Server) begin(rc *fasthttp.RequestCtx) {
	rc.Response.Header.Set("Audit-Id", s.ids.next())
	rc.Response.Header.Set("Cache-Control", "no-cache, private")
}

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
	rc.Response.Header.Set("Audit-Id", id)
	rc.Response.Header.Set("Cache-Control", "no-cache, private")
	s.api.WriteError(rc, fmt.Errorf("panic: %v", v))
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

func (a auditIDs) next() string {
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
	return string(b[:])
}
