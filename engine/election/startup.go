package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// At start the strategy modules of the plugins directory are still being
// read and compiled (a few hundred milliseconds, seconds for a cold Go
// guest) while the caches sync in tens of milliseconds. Deciding at once
// would judge every custom strategy missing: the lease left alone, an
// alarming log line at every start, and the first grant a decision
// later. So the worker waits for Options.StrategiesLoaded, bounded by
// StrategiesLoadWait: a directory that takes longer must not keep every
// lease leaderless, so then the controller decides, and a lease whose
// module is still missing gets the fallback (which never preempts),
// recorded as a fallback whose cause says so, until the load ends and a
// Resync re-decides with the real module.

// Where the wait for the strategy modules stands.
const (
	strategiesWaiting int32 = iota
	strategiesLoaded
	// strategiesLate: the wait timed out and the load is not over yet.
	strategiesLate
)

// errStrategiesLoading is the cause of a fallback decision taken because
// the wait for the strategy modules timed out.
var errStrategiesLoading = errors.New("the strategy modules have not finished loading")

// awaitStrategies blocks until the strategy modules loaded or the wait is
// over; it reports false when ctx ended first.
func (c *Controller) awaitStrategies(ctx context.Context) bool {
	loaded := c.opts.StrategiesLoaded
	if loaded == nil {
		c.strategies.Store(strategiesLoaded)
		return true
	}
	start := c.now()
	timer := time.NewTimer(c.opts.StrategiesLoadWait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-loaded:
		c.strategies.Store(strategiesLoaded)
		c.log.Debug("Strategy modules loaded; electing", "waited", c.now().Sub(start).Round(time.Millisecond).String())
		return true
	case <-timer.C:
	}
	c.strategies.Store(strategiesLate)
	c.log.Warn("Strategy modules still loading; electing now, with the fallback strategy where a lease's module is missing",
		"waited", c.opts.StrategiesLoadWait.String())
	go func() {
		select {
		case <-ctx.Done():
		case <-loaded:
			c.strategies.Store(strategiesLoaded)
			c.log.Info("Strategy modules loaded; re-deciding every lease")
			c.Resync()
		}
	}()
	return true
}

// Deciding reports nil once the controller makes decisions: both caches
// synced and the strategy modules loaded (or the wait for them over).
// It is the election controller's readiness.
func (c *Controller) Deciding() error {
	switch {
	case !c.Synced():
		return errors.New("election controller has not synced yet")
	case c.strategies.Load() == strategiesWaiting:
		return errors.New("election controller is waiting for the strategy modules to load")
	}
	return nil
}

// lookup resolves the candidates' strategy. While the modules are late,
// a missing one resolves to a stand-in that fails, so that the fallback
// decides and the decision history says why.
func (c *Controller) lookup(strategy string) (abi.Strategy, bool) {
	if s, ok := c.opts.Registry.Lookup(strategy); ok {
		return s, true
	}
	if c.strategies.Load() == strategiesLate {
		return notLoaded{name: strategy}, true
	}
	return nil, false
}

// notLoaded stands for a strategy whose module may still be loading.
type notLoaded struct{ name string }

func (n notLoaded) Name() string { return n.name }

func (n notLoaded) Module() abi.ModuleInfo { return abi.ModuleInfo{Name: n.name + " (not loaded)"} }

func (n notLoaded) Decide(context.Context, *abi.Input) (*abi.Decision, error) {
	return nil, fmt.Errorf("no module implements %s yet: %w", n.name, errStrategiesLoading)
}
