package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// At start the strategy modules of the plugins directory are still being
// read and compiled (a few hundred milliseconds; seconds, or tens of them
// on a small or busy device, for a cold Go guest) while the caches sync
// in tens of milliseconds. Deciding at once would judge every custom
// strategy missing: the lease left alone, an alarming log line at every
// start, and the first grant a decision later. Waiting for the whole
// directory before deciding anything would instead hold up leases whose
// strategy is built in.
//
// So the wait is per lease: a lease whose strategy the registry serves is
// decided at once; a lease whose strategy is missing while the first load
// runs is left alone, quietly (no abstention, no log line), and decided
// by a Resync when the load ends. The load is bounded by
// StrategiesLoadWait: a directory that takes longer must not keep a lease
// leaderless, so then a lease whose module is still missing gets the
// fallback (which never preempts), recorded as a fallback whose cause
// says so, until the load ends and a Resync re-decides with the real
// module.

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

// watchStrategies follows the first load of the strategy modules: it
// marks them loaded (or late, once StrategiesLoadWait is over) and
// re-decides every lease at each change, for the leases that waited.
func (c *Controller) watchStrategies(ctx context.Context) {
	loaded := c.opts.StrategiesLoaded
	if loaded == nil {
		c.strategies.Store(strategiesLoaded)
		return
	}
	select {
	case <-loaded:
		// Loaded before the worker started: nothing waited.
		c.strategies.Store(strategiesLoaded)
		return
	default:
	}
	go func() {
		start := c.now()
		timer := time.NewTimer(c.opts.StrategiesLoadWait)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return
		case <-loaded:
			c.strategies.Store(strategiesLoaded)
			c.log.Debug("Strategy modules loaded; deciding the leases that waited for them",
				"waited", c.now().Sub(start).Round(time.Millisecond).String())
			c.Resync()
			return
		case <-timer.C:
		}
		c.strategies.Store(strategiesLate)
		c.log.Warn("Strategy modules still loading; the fallback strategy decides where a lease's module is missing",
			"waited", c.opts.StrategiesLoadWait.String())
		c.Resync()
		select {
		case <-ctx.Done():
		case <-loaded:
			c.strategies.Store(strategiesLoaded)
			c.log.Info("Strategy modules loaded; re-deciding every lease")
			c.Resync()
		}
	}()
}

// Deciding reports nil once the controller makes every decision: both
// caches synced and the strategy modules loaded (or the wait for them
// over). It is the election controller's readiness.
func (c *Controller) Deciding() error {
	switch {
	case !c.Synced():
		return errors.New("election controller has not synced yet")
	case c.strategies.Load() == strategiesWaiting:
		return errors.New("election controller is waiting for the strategy modules to load")
	}
	return nil
}

// strategyLookup is what lookup found for a strategy name.
type strategyLookup int

const (
	strategyFound strategyLookup = iota
	// strategyPending: missing while the first load runs; decided later.
	strategyPending
	strategyMissing
)

// lookup resolves the candidates' strategy. While the modules are late,
// a missing one resolves to a stand-in that fails, so that the fallback
// decides and the decision history says why.
func (c *Controller) lookup(strategy string) (abi.Strategy, strategyLookup) {
	if s, ok := c.opts.Registry.Lookup(strategy); ok {
		return s, strategyFound
	}
	switch c.strategies.Load() {
	case strategiesLate:
		return notLoaded{name: strategy}, strategyFound
	case strategiesWaiting:
		return nil, strategyPending
	}
	return nil, strategyMissing
}

// notLoaded stands for a strategy whose module may still be loading.
type notLoaded struct{ name string }

func (n notLoaded) Name() string { return n.name }

func (n notLoaded) Module() abi.ModuleInfo { return abi.ModuleInfo{Name: n.name + " (not loaded)"} }

func (n notLoaded) Decide(context.Context, *abi.Input) (*abi.Decision, error) {
	return nil, fmt.Errorf("no module implements %s yet: %w", n.name, errStrategiesLoading)
}
