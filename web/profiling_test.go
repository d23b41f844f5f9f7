package web_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/web"
)

// TestProfilingFollowsTheOffLoopbackRule: the unauthenticated pprof
// listener is refused on a non-loopback address unless the operator
// accepts the risk, as the API is.
func TestProfilingFollowsTheOffLoopbackRule(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := web.StartProfiling(ctx, "0.0.0.0:0", false, log)
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("0.0.0.0 without the insecure flag: %v", err)
	}
	if err := web.StartProfiling(ctx, "127.0.0.1:0", false, log); err != nil {
		t.Errorf("loopback: %v", err)
	}
	if err := web.StartProfiling(ctx, "0.0.0.0:0", true, log); err != nil {
		t.Errorf("0.0.0.0 with the risk accepted: %v", err)
	}
}
