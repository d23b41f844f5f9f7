package election

import (
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// moduleBackoff remembers strategy modules that failed recently. A module
// that loops costs a whole DecideTimeout per call on the single worker, so
// calling it on every reconcile of every lease that uses it would delay
// all elections by seconds; within its backoff window it is not called
// and the fallback decides instead (which never preempts a live holder).
//
// Entries are keyed by strategy name and hold the failing module's
// identity (moduleString: name, version, sha256): a reload that loads
// another module under the name starts afresh, since the new code may
// well work, while a reload of the same bytes keeps the window.
type moduleBackoff struct {
	base, limit time.Duration

	mu sync.Mutex
	m  map[string]*backoffEntry
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
	return &moduleBackoff{base: base, limit: limit, m: map[string]*backoffEntry{}}
}

// entry returns the live entry for s, dropping one left by another module.
// b.mu is held.
func (b *moduleBackoff) entry(s abi.Strategy) *backoffEntry {
	e := b.m[s.Name()]
	if e != nil && e.module != moduleString(s.Module()) {
		delete(b.m, s.Name())
		return nil
	}
	return e
}

// blocked returns a non-nil error (wrapping the module's last failure, so
// ErrStrategyFailed too) while s must not be called.
func (b *moduleBackoff) blocked(s abi.Strategy, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(s)
	if e == nil || !now.Before(e.until) {
		return nil
	}
	return fmt.Errorf("%w (not called again for %v: backing off)", e.err, e.until.Sub(now).Round(time.Millisecond))
}

// active reports whether s is within a backoff window.
func (b *moduleBackoff) active(s abi.Strategy, now time.Time) bool {
	return b.blocked(s, now) != nil
}

// failed opens (or, after a window ended, doubles) the window of s and
// returns its length.
func (b *moduleBackoff) failed(s abi.Strategy, err error, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(s)
	switch {
	case e == nil:
		e = &backoffEntry{module: moduleString(s.Module()), delay: b.base}
		b.m[s.Name()] = e
	case !now.Before(e.until):
		e.delay = min(2*e.delay, b.limit)
	}
	e.until, e.err = now.Add(e.delay), err
	return e.delay
}

// succeeded forgets the failures of s.
func (b *moduleBackoff) succeeded(s abi.Strategy) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entry(s) != nil {
		delete(b.m, s.Name())
	}
}
