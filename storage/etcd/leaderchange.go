package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A member's own store (one endpoint, its local member) sends every write
// once. A write the member forwarded to a raft leader that then died is
// never answered: etcd keeps no note of forwarded proposals, and the
// request would wait its whole RequestTimeout (3 s by default) while a new
// leader serves within about a second. With Options.LeaderChanged, writes
// still in flight a short grace after the member saw a new leader end at
// once with an unknown outcome (storage.ErrTimeout, a 504), so that the
// client's next attempt goes to the new leader. The grace lets a write the
// new leader had received finish as it would have: it commits with the
// new leader's first entry, within a round trip.

// leaderChangeGrace is how long writes sent before a leader change may
// still finish before they are ended.
const leaderChangeGrace = 250 * time.Millisecond

// errLeaderChanged is the cause of a write ended by a leader change.
var errLeaderChanged = errors.New("the raft leader changed while the write waited")

// leaderTerms hands each write the context of the leadership it was sent
// under; that context ends leaderChangeGrace after the next change.
type leaderTerms struct {
	mu  sync.Mutex
	cur context.Context
}

// watch follows changed (Options.LeaderChanged) until done
// closes.
func (t *leaderTerms) watch(changed func() <-chan struct{}, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	t.mu.Lock()
	t.cur = ctx
	t.mu.Unlock()
	for {
		ch := changed()
		select {
		case <-done:
			cancel()
			return
		case <-ch:
		}
		next, nextCancel := context.WithCancel(context.Background())
		t.mu.Lock()
		t.cur = next
		t.mu.Unlock()
		time.AfterFunc(leaderChangeGrace, cancel)
		cancel = nextCancel
	}
}

// current is the context of the leadership now, nil before watch began.
func (t *leaderTerms) current() context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// endOnLeaderChange derives a write's context that ends (cause
// errLeaderChanged) once the leadership it was sent under is over; stop
// releases it. Without Options.LeaderChanged it returns ctx.
func (s *Store) endOnLeaderChange(ctx context.Context) (context.Context, func()) {
	if s.terms == nil {
		return ctx, func() {}
	}
	term := s.terms.current()
	if term == nil {
		return ctx, func() {}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(term, func() { cancel(errLeaderChanged) })
	return wctx, func() { stop(); cancel(nil) }
}

// leaderChangedErr turns the error of a write that a leader change ended
// into one of unknown outcome.
func leaderChangedErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errLeaderChanged) {
		return fmt.Errorf("%w (%w): %w", errOutcomeUnknown, errLeaderChanged, err)
	}
	return err
}
