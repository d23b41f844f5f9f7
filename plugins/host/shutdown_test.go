package host

import (
	"context"
	"log/slog"
	"testing"
)

// TestCloseAfterRun: a loader that has not stopped within
// LoaderShutdownWait leaves the host open (its compile is left to the
// process's exit); once the loader stopped, or when it never started, the
// host is closed.
func TestCloseAfterRun(t *testing.T) {
	ctx := context.Background()
	h, err := New(ctx, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	runDone := make(chan struct{})
	h.CloseAfterRun(ctx, runDone)
	if h.isClosed() {
		t.Fatal("CloseAfterRun closed the host while its loader still ran")
	}
	close(runDone)
	h.CloseAfterRun(ctx, runDone)
	if !h.isClosed() {
		t.Error("CloseAfterRun left the host open after its loader stopped")
	}
	h2, err := New(ctx, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h2.CloseAfterRun(ctx, nil)
	if !h2.isClosed() {
		t.Error("CloseAfterRun(nil) left the host open; a loader that never started is not waited for")
	}
}
