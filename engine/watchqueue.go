package engine

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// Watch memory is bounded by design. Every watch buffers its undelivered
// events in an eventQueue, counted in events and in bytes (the stored size
// of each event's object plus a fixed overhead). A watch whose queue would
// pass its own byte budget, or the event cap, is closed, as
// kube-apiserver's cacher closes a watcher that does not keep up: its
// stream ends cleanly and the client re-watches from the last
// resourceVersion it saw (or relists). All queues together also share one
// engine-wide budget: a watch that is already behind is closed when its
// next events would pass it. A watch with an empty queue is never closed
// for the shared budget, so a burst cannot take down watches that keep up;
// their events are the same shared objects the lagging ones hold.
//
// The consumer takes events in batches of bounded size (TakeEvents'
// maxBytes), and initial events are read from the store a page at a time
// as the consumer takes them, so neither a backlog nor a large collection
// is ever materialised at once.

const (
	// DefaultWatchQueueBytes is the default byte budget of one watch.
	DefaultWatchQueueBytes = 8 << 20
	// DefaultWatchQueueBytesTotal is the default budget of all watches
	// together.
	DefaultWatchQueueBytesTotal = 64 << 20
	// eventOverhead is what a queued event costs beyond its object's
	// stored size: the queue slot, the event and the object's structs.
	eventOverhead = 256
	// initialPageBytes is the stored size of one page of initial events
	// read from the store.
	initialPageBytes = 256 << 10
)

// watchBudget is the engine-wide account of queued watch events.
type watchBudget struct {
	perWatch int64
	total    int64
	used     atomic.Int64
	// lagging counts the watches closed for falling behind.
	lagging atomic.Uint64

	log      *slog.Logger
	logMu    sync.Mutex
	logged   time.Time
	unlogged uint64
}

// WatchStats describe the watch queues.
type WatchStats struct {
	// QueuedBytes is what every watch's undelivered events count now.
	QueuedBytes int64
	// LaggingClosed counts the watches closed because their client fell
	// behind, since the engine started.
	LaggingClosed uint64
	// QueueBytesPerWatch and QueueBytesTotal are the budgets.
	QueueBytesPerWatch, QueueBytesTotal int64
}

// WatchStats reports the watch queues' state and budgets.
func (e *Engine) WatchStats() WatchStats {
	b := e.watchBudget
	return WatchStats{QueuedBytes: b.used.Load(), LaggingClosed: b.lagging.Load(),
		QueueBytesPerWatch: b.perWatch, QueueBytesTotal: b.total}
}

// closedLagging counts one closed watch and logs it, at most one line a
// second (the line counts the closures it stands for): a thousand watches
// falling behind at once are one event, not a thousand lines.
func (b *watchBudget) closedLagging(resource string, events int, bytes int64) {
	b.lagging.Add(1)
	b.logMu.Lock()
	now := time.Now()
	if now.Sub(b.logged) < time.Second {
		b.unlogged++
		b.logMu.Unlock()
		return
	}
	more := b.unlogged
	b.logged, b.unlogged = now, 0
	b.logMu.Unlock()
	b.log.Warn("Closed a watch whose client fell behind; it will re-watch",
		"resource", resource, "queuedEvents", events, "queuedBytes", bytes,
		"budgetPerWatch", b.perWatch, "queuedBytesAllWatches", b.used.Load(), "alsoClosedSinceLastLine", more)
}

// queuedEvent is an event with what it counts against the budgets.
type queuedEvent struct {
	ev   watch.Event
	size int64
}

// eventQueue is the buffer between a watch's producer (a hub's dispatcher
// or a watch's own storage reader) and its consumer. It implements
// BatchWatcher's Ready and TakeEvents and ResultChan; the watch types
// embedding it add Stop.
type eventQueue struct {
	budget    *watchBudget
	maxEvents int
	resource  string

	mu       sync.Mutex
	queue    []queuedEvent
	head     int
	bytes    int64
	ended    bool          // no more events will be queued
	released bool          // the watch ended: its bytes no longer count
	signal   chan struct{} // capacity 1
	done     chan struct{} // closed when the watch ends

	// initial, while set, supplies the initial events before anything
	// queued; only the consumer touches it.
	initial *initialEvents
	// onLagging is WithLaggingHook's function, if any.
	onLagging func()

	chOnce sync.Once
	ch     chan watch.Event
}

func newEventQueue(ctx context.Context, b *watchBudget, resource string, initial *initialEvents) eventQueue {
	hook, _ := ctx.Value(laggingHookKey{}).(func())
	return eventQueue{budget: b, maxEvents: hubQueueLimit, resource: resource, initial: initial, onLagging: hook,
		signal: make(chan struct{}, 1), done: make(chan struct{})}
}

type laggingHookKey struct{}

// WithLaggingHook returns a context whose watches call fn when they are
// closed because their client fell behind. fn runs on the goroutine that
// queues events and must not block. The HTTP stream uses it to bound how
// long a client that stopped reading can keep a write, and the stream,
// blocked.
func WithLaggingHook(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, laggingHookKey{}, fn)
}

func (q *eventQueue) Ready() <-chan struct{} { return q.signal }

// TakeEvents appends queued events to dst, about maxBytes of them (at
// least one), initial events first. open is false once the watch has
// ended and everything was taken; more reports that further events are
// ready to be taken now.
func (q *eventQueue) TakeEvents(dst []watch.Event, maxBytes int) (evs []watch.Event, open, more bool) {
	n := len(dst)
	if c := q.initial; c != nil {
		q.mu.Lock()
		ended := q.ended
		q.mu.Unlock()
		done := true
		if !ended {
			var err error
			dst, done, err = c.take(dst, maxBytes)
			if err != nil {
				c.e.log.Info("Ended a watch: its initial events could not be read", "resource", q.resource, "error", err)
				q.closeQueue()
			}
		}
		if done {
			q.initial = nil
		}
		if !done || len(dst) > n {
			return dst, true, true
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var taken int64
	for q.head < len(q.queue) {
		qe := &q.queue[q.head]
		if taken > 0 && taken+qe.size > int64(maxBytes) {
			break
		}
		dst = append(dst, qe.ev)
		taken += qe.size
		*qe = queuedEvent{}
		q.head++
	}
	if !q.released {
		q.bytes -= taken
		q.budget.used.Add(-taken)
	}
	more = q.head < len(q.queue)
	switch {
	case !more && cap(q.queue) > 256:
		q.queue, q.head = nil, 0 // let a burst's backlog go
	case !more:
		q.queue, q.head = q.queue[:0], 0
	case q.head > 256 && 2*q.head > len(q.queue):
		k := copy(q.queue, q.queue[q.head:])
		clear(q.queue[k:])
		q.queue, q.head = q.queue[:k], 0
	}
	return dst, !q.ended || len(dst) > n || more, more
}

// ResultChan starts a pump from the queue to a channel on first use.
func (q *eventQueue) ResultChan() <-chan watch.Event {
	q.chOnce.Do(func() {
		q.ch = make(chan watch.Event, watchBuffer)
		go q.pump()
	})
	return q.ch
}

func (q *eventQueue) pump() {
	defer close(q.ch)
	var buf []watch.Event
	for {
		var open, more bool
		buf, open, more = q.TakeEvents(buf[:0], initialPageBytes)
		for _, ev := range buf {
			select {
			case q.ch <- ev:
			case <-q.done:
				return
			}
		}
		clear(buf)
		if !open {
			return
		}
		if len(buf) == 0 && !more {
			select {
			case <-q.signal:
			case <-q.done:
				// Hand over what was queued before the end.
				evs, _, _ := q.TakeEvents(buf[:0], math.MaxInt)
				for _, ev := range evs {
					select {
					case q.ch <- ev:
					default:
						return
					}
				}
				return
			}
		}
	}
}

func (q *eventQueue) wake() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// push queues evs, or closes a watch that fell behind (false): it would
// hold more than maxEvents events or its byte budget, or, already
// holding events, push all watches' queues over the shared budget.
func (q *eventQueue) push(evs ...queuedEvent) bool {
	var size int64
	for i := range evs {
		size += evs[i].size
	}
	b := q.budget
	q.mu.Lock()
	if q.ended {
		q.mu.Unlock()
		return false
	}
	pending := len(q.queue) - q.head
	if pending+len(evs) > q.maxEvents || q.bytes+size > b.perWatch ||
		(pending > 0 && b.used.Load()+size > b.total) {
		held := q.bytes
		q.dropLocked()
		q.ended = true
		q.mu.Unlock()
		q.wake()
		b.closedLagging(q.resource, pending, held)
		if q.onLagging != nil {
			q.onLagging()
		}
		return false
	}
	q.queue = append(q.queue, evs...)
	q.bytes += size
	b.used.Add(size)
	q.mu.Unlock()
	q.wake()
	return true
}

// dropLocked discards what is queued; q.mu is held.
func (q *eventQueue) dropLocked() {
	clear(q.queue)
	q.queue, q.head = nil, 0
	if !q.released {
		q.budget.used.Add(-q.bytes)
	}
	q.bytes = 0
}

// closeQueue ends the watch after what is queued.
func (q *eventQueue) closeQueue() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.wake()
}

// finish is the end of the watch: what is still queued stops counting
// against the budgets (a consumer may still take it), and done closes.
func (q *eventQueue) finish() {
	q.mu.Lock()
	q.ended = true
	if !q.released {
		q.released = true
		q.budget.used.Add(-q.bytes)
	}
	q.mu.Unlock()
	q.wake()
	close(q.done)
}
