package boltdb

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage"
)

// TestLeadAtOnce: a bbolt store has no other replica, so storage.Lead runs
// its function at once and ends it with ctx.
func TestLeadAtOnce(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	started, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		storage.Lead(ctx, s, "x", time.Minute, quietLogger, func(ctx context.Context) {
			close(started)
			<-ctx.Done()
		})
	}()
	// At once: well before the minute's retry a failed campaign would
	// wait (the bound is loose so that a loaded machine passes).
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("Lead did not run its function within 20s")
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("Lead did not return within 20s after its context ended")
	}
	if _, err := s.Campaign(ctx, "x"); err == nil {
		t.Fatal("Campaign with an ended context succeeded")
	}
}
