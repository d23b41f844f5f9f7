package web

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/web/metrics"
)

// CommitHealth follows the storage's commits (the bbolt backend's
// OnCommit): it feeds /metrics, and fails /readyz/storage while writes
// fail.
type CommitHealth struct {
	Metrics *metrics.Registry
	// last is the error of the last commit, nil after a successful one.
	last atomic.Pointer[error]
}

// Observe records one commit.
func (h *CommitHealth) Observe(d time.Duration, writes int, err error) {
	h.Metrics.ObserveCommit(d, writes, err)
	if err != nil {
		h.last.Store(&err)
	} else if h.last.Load() != nil {
		h.last.Store(nil)
	}
}

// StorageCheck is /readyz/storage: stats (the store's own, reading it)
// answers within two seconds, and the last commit succeeded.
func (h *CommitHealth) StorageCheck(stats func(ctx context.Context) error) Check {
	return Check{Name: "storage", Check: func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := stats(ctx); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		if p := h.last.Load(); p != nil {
			return fmt.Errorf("the last storage commit failed: %w", *p)
		}
		return nil
	}}
}
