// Package web is leasehold's HTTP server: fasthttp with kube-apiserver's
// generic filters (panic recovery, Audit-Id, Cache-Control, body limits,
// access log), the health endpoints (/healthz, /livez, /readyz), /version,
// and the Kubernetes API itself from web/apiserver.
//
// Serve shuts down gracefully: watch streams end first, then in-flight
// requests are given a few seconds to finish.
package web
