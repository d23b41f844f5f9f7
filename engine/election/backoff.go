package election

import (
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// moduleBackoff remembers which strategy modules failed recently on which
// lease. A module that loops costs a whole DecideTimeout per call on the
// single worker, so calling it on every reconcile of a lease would delay
// all elections by seconds; within its backoff window it is not called
// for that lease and the fallback decides instead (which never preempts a
// live holder).
//
// Windows are per (lease, strategy), never per module alone: a module
// that fails on one lease's input (one candidate's labels, one lease's
// history) keeps deciding every other lease. Each entry holds the failing
// module's identity (moduleString: name, version, sha256): a reload that
// loads another module under the name starts afresh, since the new code
// may well work, while a reload of the same bytes keeps the window.
//
// Memory: at most one entry per (cached lease, strategy tried on it: the
// lease's and the configured fallback), dropped on success, on another
// module version, and when the controller forgets the lease.
type moduleBackoff struct {
	base, limit time.Duration

	mu sync.Mutex
	m  map[leaseKey]map[string]*backoffEntry
}

type backoffEntry struct {
	module string
	// delay is the current window length; it doubles with each failure
	// after a window ended, up to limit, and is forgotten on success.
	delay time.Duration
	until time.Time
	// err is the last failure, reported in the decisions made without
	// calling the module.
	err error
}

func newModuleBackoff(base, limit time.Duration) *moduleBackoff {
	return &moduleBackoff{base: base, limit: limit, m: map[leaseKey]map[string]*backoffEntry{}}
}

// entry returns the live entry of s on k, dropping one left by another
// module. b.mu is held.
func (b *moduleBackoff) entry(k leaseKey, s abi.Strategy) *backoffEntry {
	e := b.m[k][s.Name()]
	if e != nil && e.module != moduleString(s.Module()) {
		b.drop(k, s.Name())
		return nil
	}
	return e
}

// drop deletes the entry of strategy on k; b.mu is held.
func (b *moduleBackoff) drop(k leaseKey, strategy string) {
	byName := b.m[k]
	delete(byName, strategy)
	if len(byName) == 0 {
		delete(b.m, k)
	}
}

// blocked returns a non-nil error (wrapping the module's last failure, so
// ErrStrategyFailed too) while s must not be called for k.
func (b *moduleBackoff) blocked(k leaseKey, s abi.Strategy, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(k, s)
	if e == nil || !now.Before(e.until) {
		return nil
	}
	return fmt.Errorf("%w (not called again on this lease for %v: backing off)", e.err, e.until.Sub(now).Round(time.Millisecond))
}

// active reports whether s is within a backoff window on k.
func (b *moduleBackoff) active(k leaseKey, s abi.Strategy, now time.Time) bool {
	return b.blocked(k, s, now) != nil
}

// failed opens (or, after a window ended, doubles) the window of s on k
// and returns its length.
func (b *moduleBackoff) failed(k leaseKey, s abi.Strategy, err error, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(k, s)
	switch {
	case e == nil:
		e = &backoffEntry{module: moduleString(s.Module()), delay: b.base}
		byName := b.m[k]
		if byName == nil {
			byName = map[string]*backoffEntry{}
			b.m[k] = byName
		}
		byName[s.Name()] = e
	case !now.Before(e.until):
		e.delay = min(2*e.delay, b.limit)
	}
	e.until, e.err = now.Add(e.delay), err
	return e.delay
}

// succeeded forgets the failures of s on k.
func (b *moduleBackoff) succeeded(k leaseKey, s abi.Strategy) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entry(k, s) != nil {
		b.drop(k, s.Name())
	}
}

// forget drops every window of k, whose lease the controller no longer
// follows.
func (b *moduleBackoff) forget(k leaseKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, k)
}

// leases is how many leases have a window (or a failure count) open.
func (b *moduleBackoff) leases() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
