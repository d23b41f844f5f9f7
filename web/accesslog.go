package web

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/web/apiserver"
	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/metrics"
)

// logRequest writes the access log line and records the request metrics.
// The line names the user but never a credential: headers are not logged,
// and kube clients never put tokens in URLs.
func (s *Server) logRequest(rc *fasthttp.RequestCtx, info *auth.RequestInfo, user *auth.User, start time.Time) {
	d := time.Since(start)
	code := rc.Response.StatusCode()
	verb := metricVerb(rc, info)
	s.metrics.ObserveRequest(metrics.RequestLabels{
		Verb: verb, Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource, Code: code,
	}, d)
	level := accessLogLevel(code, d, info)
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	if s.join != nil && isJoinPath(info.Path) && code >= 400 && code < 500 {
		return // the join logs its refusals itself, throttled (joinRefused)
	}
	suppressed := 0
	if code == fasthttp.StatusUnauthorized {
		var log bool
		if log, suppressed = s.authFailures.allow(rc.RemoteIP().String(), time.Now()); !log {
			return
		}
	}
	attrs := []slog.Attr{
		slog.String("requestID", string(rc.Response.Header.Peek("Audit-Id"))),
		slog.String("user", user.Name),
		slog.String("verb", verb),
	}
	if info.IsResourceRequest {
		attrs = append(attrs, slog.String("resource", info.Resource+"."+info.APIGroup),
			slog.String("namespace", truncateField(info.Namespace)), slog.String("name", truncateField(info.Name)))
	} else {
		attrs = append(attrs, slog.String("path", truncateField(info.Path)))
	}
	attrs = append(attrs, slog.Int("status", code), slog.Duration("latency", d),
		slog.String("remote", rc.RemoteIP().String()), slog.String("userAgent", truncateField(string(rc.UserAgent()))))
	if cause := apiserver.FailureCause(rc); cause != "" {
		attrs = append(attrs, slog.String("err", truncateField(cause)))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressedSinceLast", suppressed))
	}
	s.log.LogAttrs(context.Background(), level, "HTTP request", attrs...)
}

// slowRequest is how long a request other than a watch may take before
// its access line is logged at info level even when it succeeded.
const slowRequest = time.Second

// accessLogLevel chooses the level of a request's access line. As
// kube-apiserver (whose per-request "HTTP" lines appear only at -v=3), a
// successful request is logged at debug level: at thousands of renewals a
// second, an info line per request would cost the server a tenth of its CPU
// and flood the journal of a small device. What an operator must see stays
// at info or above: client errors (bad input is logged once, here), server
// errors, and slow requests.
func accessLogLevel(code int, d time.Duration, info *auth.RequestInfo) slog.Level {
	switch {
	case isHealthPath(info.Path):
		return slog.LevelDebug // probes report their own failures; they would drown the rest
	case code >= 500:
		return slog.LevelWarn
	case code >= 400:
		return slog.LevelInfo
	case d >= slowRequest && info.Verb != "watch":
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// metricVerb is apiserver_request_total's verb label (metrics.CleanVerb):
// the request verb in upper case with create, update and delete as their
// methods and server-side apply as APPLY; the method for non-resource
// requests.
func metricVerb(rc *fasthttp.RequestCtx, info *auth.RequestInfo) string {
	if !info.IsResourceRequest {
		return string(rc.Method())
	}
	switch info.Verb {
	case "create":
		return "POST"
	case "update":
		return "PUT"
	case "patch":
		if strings.HasPrefix(string(rc.Request.Header.ContentType()), "application/apply-patch") {
			return "APPLY"
		}
		return "PATCH"
	case "delete":
		return "DELETE"
	}
	return strings.ToUpper(info.Verb)
}
