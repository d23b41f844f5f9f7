package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/plugins/host"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/metrics"
)

// serveOps wires the operational side of serve: metrics, the named
// readiness checks and the online backup.
type serveOps struct {
	metrics *metrics.Registry
	// commitErr is the error of the last storage commit, nil after a
	// successful one: the "storage" check fails while writes fail.
	commitErr atomic.Pointer[error]
}

func newServeOps(c *securityConfig) *serveOps {
	o := &serveOps{metrics: metrics.New()}
	o.metrics.SetPerLease(c.MetricsPerLease)
	return o
}

// onCommit fits boltdb.Options.OnCommit.
func (o *serveOps) onCommit(d time.Duration, writes int, err error) {
	o.metrics.ObserveCommit(d, writes, err)
	if err != nil {
		o.commitErr.Store(&err)
	} else if o.commitErr.Load() != nil {
		o.commitErr.Store(nil)
	}
}

// configure adds security, limits, metrics, health checks and backup to
// the web server's options.
func (o *serveOps) configure(opts *web.Options, cfg *serveConfig, sec *security, store backend,
	plugins *host.Host, ctrl *atomic.Pointer[election.Controller]) {
	opts.TLS, opts.Auth, opts.Policies = sec.TLS, sec.Auth, sec.Policies
	opts.Limits = cfg.Security.webLimits()
	opts.ShutdownDelay = cfg.Security.ShutdownDelay
	opts.Metrics = o.metrics
	opts.Election = func() (metrics.Election, bool) {
		if c := ctrl.Load(); c != nil {
			return metrics.Election(c.Stats()), true
		}
		return metrics.Election{}, false
	}
	if b, ok := store.(*boltdb.Store); ok {
		opts.Backup = func(ctx context.Context, w io.Writer) (int64, error) { return b.Backup(ctx, w) }
	}
	// kube-apiserver-like named checks: /readyz/storage,
	// /readyz/plugins, /readyz/election-controller (and shutdown, added
	// by the server).
	opts.ReadyChecks = []web.Check{
		{Name: "storage", Check: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := store.Stats(ctx); err != nil {
				return fmt.Errorf("storage: %w", err)
			}
			if p := o.commitErr.Load(); p != nil {
				return fmt.Errorf("the last storage commit failed: %w", *p)
			}
			return nil
		}},
		{Name: "plugins", Check: plugins.Ready},
		{Name: "election-controller", Check: func() error {
			if c := ctrl.Load(); c != nil && !c.Synced() {
				return errors.New("election controller has not synced yet")
			}
			return nil
		}},
	}
}
