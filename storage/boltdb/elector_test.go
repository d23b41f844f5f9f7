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
		storage.Lead(ctx, s, "x", time.Second, quietLogger, func(ctx context.Context) {
			close(started)
			<-ctx.Done()
		})
	}()
	select {
	case <-started:
	case <-time.After(time.Second):
		t.Fatal("Lead did not run its function at once")
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(time.Second):
		t.Fatal("Lead did not return after its context ended")
	}
	if _, err := s.Campaign(ctx, "x"); err == nil {
		t.Fatal("Campaign with an ended context succeeded")
	}
}
