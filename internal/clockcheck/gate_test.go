package clockcheck

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestGate: the gate's floor is the latest of the build's and the
// certificates'; a gate that waits blocks on it and fails readiness while
// the clock reads before it, one that does not only warns and notes it.
func TestGate(t *testing.T) {
	noBuildInfo := func() (*debug.BuildInfo, bool) { return nil, false }
	future := time.Now().Add(time.Hour).Truncate(time.Second)
	cert := writeCert(t, t.TempDir(), "c.crt", future, future.Add(time.Hour))

	g := NewGate(true, noBuildInfo, cert, "/nonexistent/c.crt")
	if !g.Floor.At.Equal(future) || !strings.Contains(g.Floor.Why, cert) {
		t.Errorf("floor %v (%s), want %v from %s", g.Floor.At, g.Floor.Why, future, cert)
	}
	if err := g.Ready(); !errors.Is(err, ErrBehind) {
		t.Errorf("waiting gate behind its floor: Ready = %v, want ErrBehind", err)
	}
	if n := g.Note(); n != "" {
		t.Errorf("waiting gate: Note = %q, want none (Ready fails instead)", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var logs bytes.Buffer
	if err := g.Wait(ctx, slog.New(slog.NewTextHandler(&logs, nil)), Options{Poll: time.Millisecond}); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting gate behind its floor, context ended: Wait = %v, want context.Canceled", err)
	}
	if !strings.Contains(logs.String(), "Waiting for the wall clock to be set") {
		t.Errorf("waiting gate: the wait was not logged:\n%s", logs.String())
	}

	g.Waits = false
	logs.Reset()
	if err := g.Wait(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), Options{}); err != nil {
		t.Errorf("gate that does not wait: Wait = %v", err)
	}
	if !strings.Contains(logs.String(), "Serving with a wall clock that looks unset") {
		t.Errorf("gate that does not wait, clock behind: no warning logged:\n%s", logs.String())
	}
	if err := g.Ready(); err != nil {
		t.Errorf("gate that does not wait: Ready = %v, want nil", err)
	}
	if n := g.Note(); !strings.Contains(n, "looks unset") {
		t.Errorf("gate that does not wait, clock behind: Note = %q, want why the clock looks unset", n)
	}

	set := NewGate(true, noBuildInfo) // the build floor only: MinBuildTime is past
	if err := set.Ready(); err != nil {
		t.Errorf("clock past the floor: Ready = %v", err)
	}
	if err := set.Wait(context.Background(), slog.New(slog.DiscardHandler), Options{}); err != nil {
		t.Errorf("clock past the floor: Wait = %v", err)
	}
}
