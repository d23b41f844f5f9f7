package election

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/storage/boltdb"
)

// TestSupervisor: without a controller (the zero value, or shared storage
// before the store elects this server) the supervisor answers as a server
// whose controller runs elsewhere; on storage of its own the first
// controller is current at once (so readiness waits for its sync); Run
// makes it current while the store elects this server, and none once
// Run ended.
func TestSupervisor(t *testing.T) {
	var zero Supervisor
	zero.Resync() // nothing runs: nothing to re-decide
	if _, ok := zero.Stats(); ok {
		t.Error("zero Supervisor: Stats reports a running controller")
	}
	if err := zero.Deciding(); err != nil {
		t.Errorf("zero Supervisor: Deciding = %v, want nil (another server's controller decides)", err)
	}
	if _, err := zero.PreviewHandOver(context.Background(), testNS, "l", "c"); !errors.Is(err, ErrPreviewUnavailable) {
		t.Errorf("zero Supervisor: PreviewHandOver error %v, want one wrapping ErrPreviewUnavailable", err)
	}

	log := slog.New(slog.DiscardHandler)
	st, err := boltdb.Open(context.Background(), filepath.Join(t.TempDir(), "db"), boltdb.Options{Logger: log})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e, err := engine.New(engine.Options{Store: st, Logger: log})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	h := history.New(st, log)
	opts := fastOptions()
	opts.Engine, opts.History, opts.Drains, opts.Logger = e, h, h, log

	var own Supervisor
	if err := own.Prepare(opts, false); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if _, ok := own.Stats(); !ok {
		t.Error("storage of its own: the first controller is not current before Run")
	}
	if err := own.Deciding(); err == nil {
		t.Error("storage of its own: Deciding passes before the controller ran (readiness must wait for its sync)")
	}

	var shared Supervisor
	if err := shared.Prepare(opts, true); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if _, ok := shared.Stats(); ok {
		t.Error("shared storage: a controller is current before the store elected this server")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		shared.Run(ctx, st)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for shared.Deciding() != nil || !isCurrent(&shared) {
		if time.Now().After(deadline) {
			t.Fatalf("the elected server's controller did not start deciding within 30s: Deciding = %v", shared.Deciding())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if isCurrent(&shared) {
		t.Error("after Run ended a controller is still current")
	}
}

func isCurrent(s *Supervisor) bool {
	_, ok := s.Stats()
	return ok
}
