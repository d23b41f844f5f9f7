package web

import (
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web/auth"
)

func TestAccessLogLevel(t *testing.T) {
	put := &auth.RequestInfo{IsResourceRequest: true, Verb: "update", Path: "/apis/coordination.k8s.io/v1/namespaces/a/leases/b"}
	watch := &auth.RequestInfo{IsResourceRequest: true, Verb: "watch", Path: "/apis/coordination.k8s.io/v1/leases"}
	ready := &auth.RequestInfo{Path: "/readyz"}
	for _, tc := range []struct {
		name string
		code int
		d    time.Duration
		info *auth.RequestInfo
		want slog.Level
	}{
		{"renewal", 200, time.Millisecond, put, slog.LevelDebug},
		{"conflict", 409, time.Millisecond, put, slog.LevelInfo},
		{"bad input", 400, time.Millisecond, put, slog.LevelInfo},
		{"server error", 500, time.Millisecond, put, slog.LevelWarn},
		{"slow success", 200, 2 * time.Second, put, slog.LevelInfo},
		{"long watch", 200, time.Hour, watch, slog.LevelDebug},
		{"probe", 200, time.Millisecond, ready, slog.LevelDebug},
		{"failing probe", 503, time.Millisecond, ready, slog.LevelDebug},
	} {
		if got := accessLogLevel(tc.code, tc.d, tc.info); got != tc.want {
			t.Errorf("%s: level %v, want %v", tc.name, got, tc.want)
		}
	}
}
