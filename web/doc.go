// Package web is leasehold's HTTP server: fasthttp with kube-apiserver's
// generic filters in its order (Audit-Id and Cache-Control, panic
// recovery, authentication and ABAC authorization from web/auth, the
// in-flight and per-client watch limits), the access log and request
// metrics, the health endpoints (/healthz, /livez, /readyz with named
// checks), /version, /metrics (web/metrics), the online backup endpoint,
// the UI and the Kubernetes API itself from web/apiserver.
//
// Health endpoints and the UI's page and assets are public; everything
// else (the UI's JSON included) needs credentials once an authenticator is
// configured. Without one every request is anonymous and allowed, which
// main permits only on loopback unless told otherwise.
//
// Serve shuts down gracefully: readiness fails first (for
// Options.ShutdownDelay the server keeps serving), then watch streams end,
// then in-flight requests are given a few seconds to finish.
package web
