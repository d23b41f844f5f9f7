package election

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/storage"
)

// ControllerElection is the storage election that picks the one server
// (of replicas or cluster members) running the election controller.
const ControllerElection = "election-controller"

// Supervisor runs the election controller on one server at a time: the
// store elects the server (ControllerElection; at once on a database of
// its own), and each term runs a fresh controller with fresh caches, so
// that a server that lost the store's election and won it back decides
// from a new list, not from what it saw before.
//
// The zero value has no controller: its methods answer as a server whose
// controller runs elsewhere, so that what must exist before the
// controller's options do (the strategy host's OnChange) can hold it.
type Supervisor struct {
	// current is the controller this server runs, nil while another
	// server sharing the store leads.
	current atomic.Pointer[Controller]
	opts    Options
	first   *Controller
}

// Prepare makes the first controller from opts. On storage of its own
// (shared false) that controller is current at once, so that the server
// is ready only once it synced; on shared storage it becomes current when
// the store elects this server.
func (s *Supervisor) Prepare(opts Options, shared bool) error {
	first, err := New(opts)
	if err != nil {
		return fmt.Errorf("start election controller: %w", err)
	}
	s.opts, s.first = opts, first
	if !shared {
		s.current.Store(first)
	}
	return nil
}

// Run campaigns in e for ControllerElection and runs a controller while
// this server leads, until ctx ends. The first term runs the controller
// Prepare made; every later term a new one.
func (s *Supervisor) Run(ctx context.Context, e storage.Elector) {
	log := s.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	storage.Lead(ctx, e, ControllerElection, time.Second, log, func(ctx context.Context) {
		c := s.first
		s.first = nil // each term gets a fresh controller
		if c == nil {
			var err error
			if c, err = New(s.opts); err != nil {
				log.Error("Starting the election controller failed", "err", err)
				return
			}
		}
		s.current.Store(c)
		defer s.current.Store(nil)
		_ = c.Run(ctx)
	})
}

// Resync has the running controller re-decide every lease (after the
// strategy modules changed); nothing while none runs here.
func (s *Supervisor) Resync() {
	if c := s.current.Load(); c != nil {
		c.Resync()
	}
}

// Stats are the running controller's counters; false while none runs
// here.
func (s *Supervisor) Stats() (Stats, bool) {
	if c := s.current.Load(); c != nil {
		return c.Stats(), true
	}
	return Stats{}, false
}

// Deciding is the controller's readiness (Controller.Deciding): nil while
// none runs here, since another server's controller decides then.
func (s *Supervisor) Deciding() error {
	if c := s.current.Load(); c != nil {
		return c.Deciding()
	}
	return nil
}

// PreviewHandOver asks the running controller (Controller.PreviewHandOver);
// while none runs here the error wraps ErrPreviewUnavailable.
func (s *Supervisor) PreviewHandOver(ctx context.Context, namespace, name, candidate string) (HandOverPreview, error) {
	c := s.current.Load()
	if c == nil {
		return HandOverPreview{}, fmt.Errorf("%w: the election controller does not run on this server now (in a cluster it runs on one member at a time: ask the one that leads it)", ErrPreviewUnavailable)
	}
	return c.PreviewHandOver(ctx, namespace, name, candidate)
}
