package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/leasehold/leasehold/storage"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Watch fan-out. All watches of one storage prefix (a kind in a namespace,
// or in all namespaces) share one storage watch and one dispatcher: a
// watchHub. The dispatcher decodes each stored event once, applies every
// watcher's selectors and resourceVersion, and appends the resulting
// events to each watcher's queue; it never blocks on a watcher. A watcher
// is a queue, not a goroutine chain: the HTTP stream drains it in batches
// (BatchWatcher), and a channel pump starts only for callers of
// ResultChan. A watcher that falls hubQueueLimit events behind is closed,
// as kube-apiserver's cacher closes unresponsive watchers; its client
// re-watches from the last resourceVersion it saw.
//
// A watch joins a hub when everything after its starting revision is
// still to come or still in the hub's ring of recent events; otherwise
// (older revisions, served from the store's history or answered with 410)
// it takes the per-watch path in watch.go.

// hubRingSize is how many recent events a hub keeps for watches that
// start slightly in its past (typically a list's revision).
const hubRingSize = 1024

// hubQueueLimit is how many undelivered events a watcher may hold (beyond
// its initial events) before it is closed; a variable for tests.
var hubQueueLimit = 8192

// BatchWatcher is implemented by the engine's watches for consumers that
// drain events in batches instead of one channel receive per event.
type BatchWatcher interface {
	watch.Interface
	// Ready is signalled when events were queued or the watch ended.
	Ready() <-chan struct{}
	// TakeEvents appends the queued events to dst and returns it; open is
	// false once the watch has ended and everything was taken.
	TakeEvents(dst []watch.Event) (evs []watch.Event, open bool)
}

type sharedObjectsKey struct{}

// WithSharedWatchObjects marks ctx so that Watch delivers the objects it
// shares between watchers as they are, without a per-watcher copy. The
// caller promises never to write to them, not even their TypeMeta (which
// encoders set while encoding): it must copy an object before handing it
// to such an encoder. The watch stream of the HTTP server does that, so
// that a renewal seen by a thousand watchers is not copied a thousand
// times.
func WithSharedWatchObjects(ctx context.Context) context.Context {
	return context.WithValue(ctx, sharedObjectsKey{}, true)
}

func sharedObjects(ctx context.Context) bool {
	v, _ := ctx.Value(sharedObjectsKey{}).(bool)
	return v
}

// hubEvent is one stored event, decoded once for every watcher.
type hubEvent struct {
	ev  storage.Event
	cur object // the new state of a put; nil for a delete
	// prev is decoded on first use (selector transitions, deletes).
	prev    object
	prevErr error
	prevOK  bool
	// outs memoises the per-version objects shared by watchers.
	outs []versionObj
}

type versionObj struct {
	version string
	deleted bool
	obj     runtime.Object
}

// watchHub is the shared fan-out of one storage prefix.
type watchHub struct {
	e      *Engine
	k      *kind
	prefix string
	sw     storage.Watcher
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	watchers map[*hubWatcher]struct{}
	// rev is the last revision dispatched: every event of the prefix up
	// to it has been queued to the registered watchers.
	rev int64
	// ring holds the latest dispatched events; together they are every
	// event of the prefix in (ringFrom, rev].
	ring     []*hubEvent
	ringHead int
	ringFrom int64
	// progressAsked: a progress request is on its way through the store.
	progressAsked bool
}

// hubFor returns the running hub of prefix, starting one if needed.
func (e *Engine) hubFor(k *kind, prefix string) (*watchHub, error) {
	e.hubsMu.Lock()
	defer e.hubsMu.Unlock()
	if h := e.hubs[prefix]; h != nil {
		h.mu.Lock()
		closed := h.closed
		h.mu.Unlock()
		if !closed {
			return h, nil
		}
		delete(e.hubs, prefix)
	}
	rev, err := e.store.CurrentRevision(context.Background())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sw, err := e.store.Watch(ctx, prefix, rev)
	if err != nil {
		cancel()
		return nil, err
	}
	h := &watchHub{e: e, k: k, prefix: prefix, sw: sw, cancel: cancel,
		watchers: map[*hubWatcher]struct{}{}, rev: rev, ringFrom: rev}
	if e.hubs == nil {
		e.hubs = map[string]*watchHub{}
	}
	e.hubs[prefix] = h
	go h.run()
	return h, nil
}

// stopLocked ends the hub; h.mu is held. Its watchers are closed.
func (h *watchHub) stopLocked() {
	if h.closed {
		return
	}
	h.closed = true
	for w := range h.watchers {
		w.closeQueue()
	}
	clear(h.watchers)
	clear(h.ring)
	h.cancel()
	go func() { // not under h.mu: hubFor holds hubsMu, then never h.mu
		h.e.hubsMu.Lock()
		if h.e.hubs[h.prefix] == h {
			delete(h.e.hubs, h.prefix)
		}
		h.e.hubsMu.Unlock()
		h.sw.Stop()
	}()
}

// run dispatches the storage watch's responses until it ends.
func (h *watchHub) run() {
	defer func() {
		h.mu.Lock()
		h.stopLocked()
		h.mu.Unlock()
	}()
	for resp := range h.sw.ResultChan() {
		if resp.Err != nil {
			if !errors.Is(resp.Err, context.Canceled) && !errors.Is(resp.Err, storage.ErrClosed) {
				h.e.log.Debug("shared watch ended by storage", "prefix", h.prefix, "error", resp.Err)
			}
			return
		}
		if len(resp.Events) == 0 {
			h.progress(resp.Revision)
			continue
		}
		evs := make([]*hubEvent, 0, len(resp.Events))
		for _, ev := range resp.Events {
			he := &hubEvent{ev: ev}
			if ev.Type == storage.EventPut {
				cur, err := h.e.decoded.get(h.k, ev.KV.Key, ev.KV.ModRevision, ev.KV.Value)
				if err != nil {
					h.e.log.Error("watch: undecodable stored object", "key", ev.KV.Key, "error", err)
					continue
				}
				he.cur = cur
			}
			evs = append(evs, he)
		}
		h.dispatch(evs, resp.Revision)
	}
}

// dispatch queues one committed round to every watcher and remembers it.
func (h *watchHub) dispatch(evs []*hubEvent, rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for w := range h.watchers {
		w.deliver(evs)
	}
	for _, he := range evs {
		if len(h.ring) < hubRingSize {
			h.ring = append(h.ring, he)
			continue
		}
		h.ringFrom = h.ring[h.ringHead].ev.KV.ModRevision
		h.ring[h.ringHead] = he
		h.ringHead = (h.ringHead + 1) % hubRingSize
	}
	h.rev = max(h.rev, rev)
}

// progress answers the bookmark requests pending at a progress
// notification: every event up to rev has been queued before it.
func (h *watchHub) progress(rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.progressAsked = false
	if h.closed {
		return
	}
	h.rev = max(h.rev, rev)
	for w := range h.watchers {
		if w.wantBookmark {
			w.wantBookmark = false
			w.push(watch.Event{Type: watch.Bookmark, Object: w.bookmark(rev, false)})
		}
	}
}

// askBookmark makes w's next bookmark come with the next progress
// notification, which it requests unless one is on its way.
func (h *watchHub) askBookmark(w *hubWatcher) {
	h.mu.Lock()
	if _, ok := h.watchers[w]; !ok {
		h.mu.Unlock()
		return
	}
	w.wantBookmark = true
	ask := !h.progressAsked
	h.progressAsked = true
	h.mu.Unlock()
	if ask {
		h.sw.RequestProgress()
	}
}

// join registers w to receive every event after since (0: after the
// store's current revision), first queueing initial (the initial events
// and bookmark, if any). It returns false when the hub can no longer
// provide every such event (ring overrun, or the hub ended); the caller
// then uses the per-watch path.
func (h *watchHub) join(w *hubWatcher, since int64, initial []watch.Event) bool {
	if since == 0 {
		cur, err := h.e.store.CurrentRevision(context.Background())
		if err != nil {
			return false
		}
		since = cur
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	w.minRev = since
	if since < h.rev {
		// The ring must hold every event after since, and the store must
		// not have compacted since (the per-watch path answers 410 then).
		if since < h.ringFrom {
			return false
		}
		if c, err := h.e.store.CompactRevision(context.Background()); err != nil || since < c {
			return false
		}
	}
	w.hub = h
	w.queue = append(w.queue, initial...)
	w.limit = hubQueueLimit + len(initial)
	if since < h.rev {
		n := len(h.ring)
		replay := make([]*hubEvent, 0, n)
		for i := 0; i < n; i++ {
			replay = append(replay, h.ring[(h.ringHead+i)%n])
		}
		w.deliver(replay)
	}
	h.watchers[w] = struct{}{}
	if len(w.queue) > 0 {
		w.wake()
	}
	return true
}

// leave unregisters w; the last watcher to leave stops the hub.
func (h *watchHub) leave(w *hubWatcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
	w.closeQueue()
	if len(h.watchers) == 0 {
		h.stopLocked()
	}
}

// objFor is the shared object of he for a version: the new state, or for
// a deletion the last state with the deletion's revision. h.mu is held.
func (h *watchHub) objFor(he *hubEvent, version string, deleted bool) (runtime.Object, bool) {
	for _, o := range he.outs {
		if o.version == version && o.deleted == deleted {
			return o.obj, true
		}
	}
	var obj runtime.Object
	if deleted {
		prev, ok := h.prevOf(he)
		if !ok {
			return nil, false
		}
		o := prev.DeepCopyObject().(object)
		o.SetResourceVersion(formatRV(he.ev.KV.ModRevision))
		obj = h.k.fromStorage(o, version)
	} else {
		obj = h.k.fromStorage(he.cur, version)
	}
	he.outs = append(he.outs, versionObj{version: version, deleted: deleted, obj: obj})
	return obj, true
}

// prevOf decodes the previous state of he once. h.mu is held.
func (h *watchHub) prevOf(he *hubEvent) (object, bool) {
	if !he.prevOK && he.prevErr == nil && he.ev.PrevKV != nil {
		p := he.ev.PrevKV
		he.prev, he.prevErr = h.e.decoded.get(h.k, p.Key, p.ModRevision, p.Value)
		if he.prevErr != nil {
			h.e.log.Error("watch: undecodable stored object", "key", p.Key, "error", he.prevErr)
		}
		he.prevOK = he.prevErr == nil
	}
	return he.prev, he.prevOK
}

// hubWatcher is one watch served by a hub.
type hubWatcher struct {
	hub       *watchHub
	k         *kind
	q         *listQuery
	version   string
	own       bool // copy shared objects for the consumer
	bookmarks bool
	minRev    int64
	limit     int
	cancel    context.CancelFunc
	stopOnce  sync.Once

	// Under hub.mu (or before registration).
	wantBookmark bool

	mu     sync.Mutex
	queue  []watch.Event
	ended  bool          // no more events will be queued
	signal chan struct{} // capacity 1
	done   chan struct{} // closed when the watch ends

	chOnce sync.Once
	ch     chan watch.Event
}

var _ BatchWatcher = (*hubWatcher)(nil)

func (w *hubWatcher) Stop() { w.stopOnce.Do(w.cancel) }

func (w *hubWatcher) Ready() <-chan struct{} { return w.signal }

func (w *hubWatcher) TakeEvents(dst []watch.Event) ([]watch.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dst = append(dst, w.queue...)
	clear(w.queue)
	if cap(w.queue) > 256 {
		w.queue = nil // let a burst's backlog go
	} else {
		w.queue = w.queue[:0]
	}
	return dst, !w.ended || len(dst) > 0
}

// ResultChan starts a pump from the queue to a channel on first use.
func (w *hubWatcher) ResultChan() <-chan watch.Event {
	w.chOnce.Do(func() {
		w.ch = make(chan watch.Event, watchBuffer)
		go w.pump()
	})
	return w.ch
}

func (w *hubWatcher) pump() {
	defer close(w.ch)
	var buf []watch.Event
	for {
		var open bool
		buf, open = w.TakeEvents(buf[:0])
		for _, ev := range buf {
			select {
			case w.ch <- ev:
			case <-w.done:
				return
			}
		}
		if !open {
			return
		}
		if len(buf) == 0 {
			select {
			case <-w.signal:
			case <-w.done:
				// Hand over what was queued before the end.
				if evs, _ := w.TakeEvents(buf[:0]); len(evs) > 0 {
					for _, ev := range evs {
						select {
						case w.ch <- ev:
						default:
							return
						}
					}
				}
				return
			}
		}
	}
}

func (w *hubWatcher) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// push queues one event; a watcher too far behind is closed.
func (w *hubWatcher) push(evs ...watch.Event) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	if len(w.queue)+len(evs) > w.limit {
		clear(w.queue)
		w.queue = nil
		w.ended = true
		w.mu.Unlock()
		w.wake()
		w.hub.e.log.Debug("watch closed: its client fell behind", "prefix", w.hub.prefix, "events", w.limit)
		return
	}
	w.queue = append(w.queue, evs...)
	w.mu.Unlock()
	w.wake()
}

// closeQueue ends the watch after what is queued.
func (w *hubWatcher) closeQueue() {
	w.mu.Lock()
	if !w.ended {
		w.ended = true
	}
	w.mu.Unlock()
	w.wake()
}

// deliver queues the events of one round that concern w. hub.mu is held.
func (w *hubWatcher) deliver(evs []*hubEvent) {
	var out [8]watch.Event
	batch := out[:0]
	for _, he := range evs {
		if he.ev.KV.ModRevision <= w.minRev {
			continue
		}
		typ, obj := w.translate(he)
		if obj == nil {
			continue
		}
		if w.own {
			obj = ShallowCopy(obj)
		}
		batch = append(batch, watch.Event{Type: typ, Object: obj})
	}
	if len(batch) > 0 {
		w.push(batch...)
	}
}

// translate applies the selectors like watchRun.translate: an object that
// starts matching is ADDED, one that stops matching is DELETED (old
// object, new revision).
func (w *hubWatcher) translate(he *hubEvent) (watch.EventType, runtime.Object) {
	h := w.hub
	ev := &he.ev
	switch ev.Type {
	case storage.EventPut:
		if he.cur == nil {
			return "", nil
		}
		curMatch := w.q.matches(he.cur)
		if ev.PrevKV == nil {
			if curMatch {
				o, _ := h.objFor(he, w.version, false)
				return watch.Added, o
			}
			return "", nil
		}
		prevMatch := true
		if !w.q.empty() {
			prev, ok := h.prevOf(he)
			if !ok {
				return "", nil
			}
			prevMatch = w.q.matches(prev)
		}
		switch {
		case curMatch && prevMatch:
			o, _ := h.objFor(he, w.version, false)
			return watch.Modified, o
		case curMatch:
			o, _ := h.objFor(he, w.version, false)
			return watch.Added, o
		case prevMatch:
			o, ok := h.objFor(he, w.version, true)
			if !ok {
				return "", nil
			}
			return watch.Deleted, o
		}
	case storage.EventDelete:
		prev, ok := h.prevOf(he)
		if !ok || !w.q.matches(prev) {
			return "", nil
		}
		o, ok := h.objFor(he, w.version, true)
		if !ok {
			return "", nil
		}
		return watch.Deleted, o
	}
	return "", nil
}

// bookmark is watchRun.bookmark for a hub watcher.
func (w *hubWatcher) bookmark(rev int64, initialEnd bool) runtime.Object {
	r := watchRun{k: w.k, version: w.version}
	return r.bookmark(rev, initialEnd)
}

// watchShared serves a watch from its prefix's hub; ok false means the
// hub cannot (the caller uses the per-watch path).
func (e *Engine) watchShared(ctx context.Context, k *kind, prefix string, q *listQuery, version string, since int64, initial []watch.Event, timeout time.Duration) (watch.Interface, bool) {
	for range 3 { // a hub that just stopped: take the next one
		h, err := e.hubFor(k, prefix)
		if err != nil {
			return nil, false
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		w := &hubWatcher{k: k, q: q, version: version, own: !sharedObjects(ctx),
			bookmarks: q.opts.AllowWatchBookmarks, cancel: cancel,
			signal: make(chan struct{}, 1), done: make(chan struct{})}
		if !h.join(w, since, initial) {
			cancel()
			h.mu.Lock()
			closed := h.closed
			h.mu.Unlock()
			if closed {
				continue
			}
			return nil, false
		}
		stopOnParent := context.AfterFunc(ctx, cancel)
		var timers []*time.Timer
		if w.bookmarks {
			var mu sync.Mutex
			var t *time.Timer
			tick := func() {
				select {
				case <-w.done:
					return
				default:
				}
				h.askBookmark(w)
				mu.Lock()
				t.Reset(e.bookmarkInterval)
				mu.Unlock()
			}
			mu.Lock()
			t = time.AfterFunc(e.bookmarkInterval, tick)
			mu.Unlock()
			timers = append(timers, t)
			if timeout > bookmarkBeforeDeadline {
				timers = append(timers, time.AfterFunc(timeout-bookmarkBeforeDeadline, func() { h.askBookmark(w) }))
			}
		}
		context.AfterFunc(wctx, func() {
			stopOnParent()
			for _, t := range timers {
				t.Stop()
			}
			h.leave(w)
			close(w.done)
		})
		return w, true
	}
	return nil, false
}
