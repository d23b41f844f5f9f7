package flowcontrol

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Rejection reasons, the reason label of
// apiserver_flowcontrol_rejected_requests_total as upstream names them.
const (
	ReasonQueueFull = "queue-full"
	ReasonTimeout   = "time-out"
	ReasonCancelled = "cancelled"
)

// level is one class's seats and its fair queues.
type level struct {
	class    Class
	seats    int // nominal limit, never lent
	flowLen  int // queued requests per flow
	maxQueue int // queued requests in the class

	mu        sync.Mutex
	used      int // seats taken
	executing int
	queued    int
	flows     map[string]*flow
	// turn holds the flows with waiters in round-robin order: the head
	// is served next, then goes to the back if it still has waiters.
	turn []*flow

	dispatched atomic.Uint64
	rejected   [3]atomic.Uint64 // by reason: queue-full, time-out, cancelled
}

type flow struct {
	key string
	q   []*waiter
}

type waiter struct {
	width   int
	ready   chan struct{}
	granted bool
}

func newLevel(c Class, seats, flowLen int) *level {
	return &level{class: c, seats: max(seats, 1), flowLen: max(flowLen, 1),
		maxQueue: max(flowLen, 1) * 16, flows: map[string]*flow{}}
}

// acquire takes width seats (at most the class's), queueing in flow key
// for at most wait. It returns "" once the seats are held, else the
// rejection reason.
func (l *level) acquire(ctx context.Context, key string, width int, wait time.Duration) (int, string) {
	width = min(max(width, 1), l.seats)
	l.mu.Lock()
	if l.queued == 0 && l.used+width <= l.seats {
		l.used += width
		l.executing++
		l.mu.Unlock()
		l.dispatched.Add(1)
		return width, ""
	}
	f := l.flows[key]
	if f == nil {
		f = &flow{key: key}
	}
	if len(f.q) >= l.flowLen || l.queued >= l.maxQueue {
		l.mu.Unlock()
		l.rejected[0].Add(1)
		return 0, ReasonQueueFull
	}
	if len(f.q) == 0 {
		l.flows[key] = f
		l.turn = append(l.turn, f)
	}
	w := &waiter{width: width, ready: make(chan struct{})}
	f.q = append(f.q, w)
	l.queued++
	l.dispatchLocked()
	l.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	reason := ReasonTimeout
	select {
	case <-w.ready:
		l.dispatched.Add(1)
		return width, ""
	case <-t.C:
	case <-ctx.Done():
		reason = ReasonCancelled
	}
	l.mu.Lock()
	if w.granted { // granted while the timer fired
		l.mu.Unlock()
		l.dispatched.Add(1)
		return width, ""
	}
	i := slices.Index(f.q, w)
	f.q = slices.Delete(f.q, i, i+1)
	l.queued--
	if len(f.q) == 0 {
		l.dropFlowLocked(f)
	}
	// The head of another flow may fit now that this one left the line.
	l.dispatchLocked()
	l.mu.Unlock()
	if reason == ReasonTimeout {
		l.rejected[1].Add(1)
	} else {
		l.rejected[2].Add(1)
	}
	return 0, reason
}

func (l *level) dropFlowLocked(f *flow) {
	delete(l.flows, f.key)
	if i := slices.Index(l.turn, f); i >= 0 {
		l.turn = slices.Delete(l.turn, i, i+1)
	}
}

// dispatchLocked hands free seats to the flows in turn. A head request
// that does not fit waits for seats, and so does everyone behind it: a
// wide LIST is not overtaken forever by narrow ones.
func (l *level) dispatchLocked() {
	for len(l.turn) > 0 {
		f := l.turn[0]
		w := f.q[0]
		if l.used+w.width > l.seats {
			return
		}
		f.q[0] = nil
		f.q = f.q[1:]
		l.queued--
		l.used += w.width
		l.executing++
		w.granted = true
		close(w.ready)
		l.turn = l.turn[1:]
		if len(f.q) > 0 {
			l.turn = append(l.turn, f)
		} else {
			delete(l.flows, f.key)
		}
	}
}

// release gives width seats back.
func (l *level) release(width int) {
	l.mu.Lock()
	l.used -= width
	l.executing--
	l.dispatchLocked()
	l.mu.Unlock()
}

type levelStats struct {
	seats, used, executing, queued int
}

func (l *level) stats() levelStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return levelStats{seats: l.seats, used: l.used, executing: l.executing, queued: l.queued}
}
