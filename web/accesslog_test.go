package web

import (
	"log/slog"
	"strconv"
	"strings"
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

func TestAuthFailureThrottle(t *testing.T) {
	var f failureThrottle
	now := time.Now()
	if ok, n := f.allow("10.0.0.1", now); !ok || n != 0 {
		t.Fatalf("first failure: %v %d", ok, n)
	}
	for i := 0; i < 2999; i++ {
		if ok, _ := f.allow("10.0.0.1", now.Add(time.Duration(i)*time.Millisecond)); ok {
			t.Fatalf("failure %d within the interval was logged", i+2)
		}
	}
	if ok, _ := f.allow("10.0.0.2", now); !ok {
		t.Error("another client's first failure was suppressed")
	}
	if ok, n := f.allow("10.0.0.1", now.Add(authFailureInterval)); !ok || n != 2999 {
		t.Errorf("after the interval: %v, suppressed %d, want 2999", ok, n)
	}
	// Memory stays bounded however many addresses fail.
	for i := 0; i < 3*authFailureClients; i++ {
		f.allow(strconv.Itoa(i), now)
	}
	if len(f.clients) > authFailureClients+1 {
		t.Errorf("%d clients remembered, bound %d", len(f.clients), authFailureClients)
	}
}

func TestTruncateField(t *testing.T) {
	long := strings.Repeat("x", 4096)
	if got := truncateField(long); len(got) > maxLoggedField+20 || !strings.HasSuffix(got, "(truncated)") {
		t.Errorf("truncated to %d bytes: %.40q", len(got), got)
	}
	if truncateField("kubectl/v1.37") != "kubectl/v1.37" {
		t.Error("a short field changed")
	}
}
