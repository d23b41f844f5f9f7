package boltdb

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/leasehold/leasehold/storage"
)

// watcher is one open watch. The writer never blocks on it: responses are
// appended to an unbounded-but-capped queue under mu, and a per-watch
// goroutine moves them to the result channel. A watcher whose queue reaches
// Options.WatchQueueLimit is ended with ErrCompacted so its client relists.
type watcher struct {
	s      *Store
	prefix string
	minRev int64 // deliver only events above this revision
	limit  int

	ctx    context.Context
	out    chan storage.WatchResponse
	signal chan struct{} // capacity 1: "the queue grew"
	stopCh chan struct{}
	stop   sync.Once

	mu    sync.Mutex
	queue []storage.WatchResponse
	head  int
	ended bool // a terminal response is queued; ignore further pushes
}

// Watch delivers every change under prefix after sinceRevision (0: from
// now): first the retained history, then live commits, with no gap or
// duplicate because registration happens under the lock that publishes.
func (s *Store) Watch(ctx context.Context, prefix string, sinceRevision int64) (storage.Watcher, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() { // Close sweeps watchers under mu after setting closed
		return nil, storage.ErrClosed
	}
	sn := s.snap.Load() // the latest: publishing takes s.mu too
	if sinceRevision == 0 {
		sinceRevision = sn.rev
	}
	if sinceRevision < sn.compactRev {
		return nil, fmt.Errorf("watch %q from %d (compacted %d): %w", prefix, sinceRevision, sn.compactRev, storage.ErrCompacted)
	}
	w := &watcher{
		s:      s,
		prefix: prefix,
		minRev: sinceRevision,
		limit:  s.opts.WatchQueueLimit,
		ctx:    ctx,
		out:    make(chan storage.WatchResponse, 16),
		signal: make(chan struct{}, 1),
		stopCh: make(chan struct{}),
	}
	replay(sn, w)
	s.watchers[w] = struct{}{}
	go w.run()
	return w, nil
}

// replay queues the retained events of sn after w.minRev, one response
// per original commit. Replay does not count against the queue limit.
func replay(sn *snapshot, w *watcher) {
	var evs []storage.Event
	for i := max(0, int(w.minRev-sn.compactRev)); i < sn.hist.len(); i++ {
		h := sn.hist.get(i)
		if strings.HasPrefix(h.ev.KV.Key, w.prefix) {
			evs = append(evs, h.ev)
		}
		if h.ev.KV.ModRevision == h.round && len(evs) > 0 {
			w.queue = append(w.queue, storage.WatchResponse{Events: evs, Revision: h.round})
			evs = nil
		}
	}
}

func (w *watcher) match(e *storage.Event) bool {
	return e.KV.ModRevision > w.minRev && strings.HasPrefix(e.KV.Key, w.prefix)
}

// deliver queues the events of one committed round that concern w. It runs
// under the store's s.mu, and never blocks.
func (w *watcher) deliver(evs []storage.Event, rev int64) {
	n := 0
	for i := range evs {
		if w.match(&evs[i]) {
			n++
		}
	}
	if n == 0 {
		return // do not wake watchers with nothing to see
	}
	if n < len(evs) {
		sub := make([]storage.Event, 0, n)
		for i := range evs {
			if w.match(&evs[i]) {
				sub = append(sub, evs[i])
			}
		}
		evs = sub
	}
	w.push(storage.WatchResponse{Events: evs, Revision: rev})
}

// push queues resp, or ends the watch if the client has fallen too far
// behind.
func (w *watcher) push(resp storage.WatchResponse) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	if len(w.queue)-w.head >= w.limit {
		w.mu.Unlock()
		w.terminate(storage.WatchResponse{Revision: resp.Revision, Err: fmt.Errorf("watch %q fell behind by %d responses: %w", w.prefix, w.limit, storage.ErrCompacted)}, true)
		return
	}
	w.queue = append(w.queue, resp)
	w.mu.Unlock()
	w.wake()
}

// terminate queues the final response; with drop, pending responses are
// discarded first (the client must relist anyway).
func (w *watcher) terminate(resp storage.WatchResponse, drop bool) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.ended = true
	if drop {
		clear(w.queue)
		w.queue, w.head = w.queue[:0], 0
	}
	w.queue = append(w.queue, resp)
	w.mu.Unlock()
	w.wake()
}

func (w *watcher) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// next pops the oldest queued response.
func (w *watcher) next() (storage.WatchResponse, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head == len(w.queue) {
		w.queue, w.head = w.queue[:0], 0
		return storage.WatchResponse{}, false
	}
	resp := w.queue[w.head]
	w.queue[w.head] = storage.WatchResponse{}
	w.head++
	return resp, true
}

// run moves queued responses to the result channel until the watch ends.
func (w *watcher) run() {
	defer close(w.out)
	defer w.s.unregister(w)
	for {
		resp, ok := w.next()
		if !ok {
			select {
			case <-w.signal:
				continue
			case <-w.ctx.Done():
				return
			case <-w.stopCh:
				return
			}
		}
		select {
		case w.out <- resp:
			if resp.Err != nil {
				return
			}
		case <-w.ctx.Done():
			return
		case <-w.stopCh:
			return
		}
	}
}

func (s *Store) unregister(w *watcher) {
	s.mu.Lock()
	delete(s.watchers, w)
	s.mu.Unlock()
	w.mu.Lock()
	w.ended = true
	clear(w.queue)
	w.queue, w.head = nil, 0
	w.mu.Unlock()
}

// ResultChan delivers responses until the watch ends.
func (w *watcher) ResultChan() <-chan storage.WatchResponse { return w.out }

// Stop ends the watch; safe to call repeatedly and concurrently.
func (w *watcher) Stop() { w.stop.Do(func() { close(w.stopCh) }) }

// RequestProgress queues a progress notification carrying the current
// revision behind every response already queued. Holding the store's mu
// excludes a concurrent publish, so no event at or below that revision can
// be queued after it.
func (w *watcher) RequestProgress() {
	w.s.mu.Lock()
	rev := w.s.snap.Load().rev
	w.push(storage.WatchResponse{Revision: rev})
	w.s.mu.Unlock()
}
