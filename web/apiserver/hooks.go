package apiserver

import "github.com/valyala/fasthttp"

// The web layer's filters run before this package's handlers and pass
// what they learnt through the request's user values.
const (
	userKey      = "leasehold.user"
	streamEndKey = "leasehold.streamEnd"
)

// SetUser records the authenticated user name, which becomes
// engine.Scope.User.
func SetUser(rc *fasthttp.RequestCtx, name string) { rc.SetUserValue(userKey, name) }

func userOf(rc *fasthttp.RequestCtx) string {
	name, _ := rc.UserValue(userKey).(string)
	return name
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
