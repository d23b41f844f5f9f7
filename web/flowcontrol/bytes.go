package flowcontrol

import (
	"context"
	"sync"
	"time"
)

// byteBudget is a FIFO weighted semaphore on bytes: LIST responses take
// their estimated size before they are built and give it back once
// written.
type byteBudget struct {
	limit int64

	mu      sync.Mutex
	held    int64
	waiters []*byteWaiter
}

type byteWaiter struct {
	n     int64
	ready chan struct{}
	done  bool
}

// acquire takes n bytes (at most the whole budget), waiting at most wait
// in line; false when the wait ran out or ctx ended.
func (b *byteBudget) acquire(ctx context.Context, n int64, wait time.Duration) (int64, bool) {
	n = min(max(n, 1), b.limit)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.held+n <= b.limit {
		b.held += n
		b.mu.Unlock()
		return n, true
	}
	w := &byteWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return n, true
	case <-t.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.done {
		return n, true
	}
	for i, o := range b.waiters {
		if o == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.wakeLocked()
	return 0, false
}

// release gives n bytes back.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.held -= n
	b.wakeLocked()
	b.mu.Unlock()
}

// wakeLocked admits waiters in order while they fit.
func (b *byteBudget) wakeLocked() {
	for len(b.waiters) > 0 && b.held+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.held += w.n
		w.done = true
		close(w.ready)
	}
}

func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}
