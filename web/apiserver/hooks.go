package apiserver

import (
	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/web/auth"
)

// The web layer's filters run before this package's handlers and pass
// what they learnt through the request's user values.
const (
	userKey      = "leasehold.user"
	streamEndKey = "leasehold.streamEnd"
	initialKey   = "leasehold.initialEvents"
	ownedBodyKey = "leasehold.ownedBody"
	causeKey     = "leasehold.cause"
)

// FailureCause is the storage failure behind the error the request was
// answered with (a 504's timeout: which endpoint, which step), for the
// access log line; empty when there was none.
func FailureCause(rc *fasthttp.RequestCtx) string {
	s, _ := rc.UserValue(causeKey).(string)
	return s
}

// MarkBodyOwned records that the request's body is a slice of its own
// (web reads a streamed body into a buffer it allocates for that request
// and never reuses), which a handler may keep beyond the request without
// a copy. Other bodies live in fasthttp's pooled buffer.
func MarkBodyOwned(rc *fasthttp.RequestCtx) { rc.SetUserValue(ownedBodyKey, true) }

// ownedBody is r's body, copied unless MarkBodyOwned said it is the
// request's own.
func ownedBody(rc *fasthttp.RequestCtx, body []byte) []byte {
	if rc.UserValue(ownedBodyKey) != nil {
		return body
	}
	return append([]byte(nil), body...)
}

// SetUser records the authenticated user: its name becomes
// engine.Scope.User, and the self reviews answer for it. Requests without
// one are anonymous.
func SetUser(rc *fasthttp.RequestCtx, u auth.User) { rc.SetUserValue(userKey, u) }

// userOf is the authenticated user's name, empty when anonymous.
func userOf(rc *fasthttp.RequestCtx) string {
	u, _ := rc.UserValue(userKey).(auth.User)
	return u.Name
}

// Requester is the user the request was authenticated as, or
// auth.Anonymous: the UI records it with the actions it audits.
func Requester(rc *fasthttp.RequestCtx) auth.User { return requesterOf(rc) }

// requesterOf is the user the request was authenticated as, or
// auth.Anonymous.
func requesterOf(rc *fasthttp.RequestCtx) auth.User {
	if u, ok := rc.UserValue(userKey).(auth.User); ok {
		return u
	}
	return auth.Anonymous
}

// OnStreamEnd registers fn to run when the watch stream this request
// opens ends (timeout, client gone, shutdown). The caller must also run it
// when the request did not open a stream (rc.Response.IsBodyStream() is
// false after the handler returned), so fn should be idempotent.
func OnStreamEnd(rc *fasthttp.RequestCtx, fn func()) { rc.SetUserValue(streamEndKey, fn) }

func streamEndOf(rc *fasthttp.RequestCtx) func() {
	if fn, ok := rc.UserValue(streamEndKey).(func()); ok {
		return fn
	}
	return func() {}
}

// OnInitialEvents registers fn to run once the watch stream this request
// opens has written the events its watch held when it began (for a watch
// without resourceVersion, every existing object as ADDED), or when the
// stream ends first. Flow control holds a watch's seats until then, as
// kube-apiserver's priority and fairness does until a watch is
// initialised. As with OnStreamEnd, the caller runs fn itself when no
// stream was opened, so fn should be idempotent.
func OnInitialEvents(rc *fasthttp.RequestCtx, fn func()) { rc.SetUserValue(initialKey, fn) }

func initialEventsOf(rc *fasthttp.RequestCtx) func() {
	if fn, ok := rc.UserValue(initialKey).(func()); ok {
		return fn
	}
	return func() {}
}
