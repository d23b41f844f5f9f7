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
// ResultChan. A watcher that falls behind (hubQueueLimit events, or its
// byte budget: watchqueue.go) is closed, as kube-apiserver's cacher
// closes unresponsive watchers; its client re-watches from the last
// resourceVersion it saw.
//
// A watch joins a hub when everything after its starting revision is
// still to come or still in the hub's ring of recent events; otherwise
// (older revisions, served from the store's history or answered with 410)
// it takes the per-watch path in watch.go.

// hubRingSize and hubRingBytes bound the recent events a hub keeps for
// watches that start slightly in its past (typically a list's revision):
// at most this many, of at most this stored size (new and previous
// values) together. Older starts take the per-watch path.
const (
	hubRingSize  = 1024
	hubRingBytes = 8 << 20
)

// hubQueueLimit is how many undelivered events a watcher may hold (beyond
// its initial events) before it is closed; a variable for tests.
var hubQueueLimit = 8192

// BatchWatcher is implemented by the engine's watches for consumers that
// drain events in batches instead of one channel receive per event.
type BatchWatcher interface {
	watch.Interface
	// Ready is signalled when events were queued or the watch ended.
	Ready() <-chan struct{}
	// TakeEvents appends queued events to dst, about maxBytes of them by
	// their stored size (at least one), and returns it; open is false
	// once the watch has ended and everything was taken, more that
	// further events can be taken at once.
	TakeEvents(dst []watch.Event, maxBytes int) (evs []watch.Event, open, more bool)
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
	// size is what the event counts in a watcher's queue (the stored
	// object), ringSize in the ring (new and previous values).
	size, ringSize int64
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
	// ring holds the latest dispatched events, oldest first, of
	// ringBytes together; they are every event of the prefix in
	// (ringFrom, rev].
	ring      []*hubEvent
	ringBytes int64
	ringFrom  int64
	// progressAsked: a progress request is on its way through the store.
	progressAsked bool
}

// hubFor returns the running hub of prefix, starting one if needed.
func (e *Engine) hubFor(k *kind, prefix string) (*watchHub, error) {
	e.hubsMu.Lock()
	defer e.hubsMu.Unlock()
	hubKey := k.res.Group + " " + prefix // two groups serve the events prefix
	if h := e.hubs[hubKey]; h != nil {
		h.mu.Lock()
		closed := h.closed
		h.mu.Unlock()
		if !closed {
			return h, nil
		}
		delete(e.hubs, hubKey)
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
	e.hubs[hubKey] = h
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
		if hubKey := h.k.res.Group + " " + h.prefix; h.e.hubs[hubKey] == h {
			delete(h.e.hubs, hubKey)
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
			he := &hubEvent{ev: ev, size: storedEventSize(&ev), ringSize: int64(len(ev.KV.Value)) + eventOverhead}
			if ev.PrevKV != nil {
				he.ringSize += int64(len(ev.PrevKV.Value))
			}
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
		h.ring = append(h.ring, he)
		h.ringBytes += he.ringSize
		for len(h.ring) > hubRingSize || (h.ringBytes > hubRingBytes && len(h.ring) > 1) {
			old := h.ring[0]
			h.ringFrom = old.ev.KV.ModRevision
			h.ringBytes -= old.ringSize
			h.ring[0] = nil
			h.ring = h.ring[1:]
		}
	}
	h.rev = max(h.rev, rev)
}

// releaseRing forgets the recent events (and so their decoded objects):
// a watch that starts before the hub's revision then takes the per-watch
// path, as one older than the ring does.
func (h *watchHub) releaseRing() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.ring)
	h.ring, h.ringBytes, h.ringFrom = nil, 0, h.rev
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
			w.push(queuedEvent{watch.Event{Type: watch.Bookmark, Object: w.bookmark(rev, false)}, eventOverhead})
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
// store's current revision); its initial events, if any, come before
// them from w's queue. It returns false when the hub can no longer
// provide every such event (ring overrun, or the hub ended); the caller
// then uses the per-watch path.
func (h *watchHub) join(w *hubWatcher, since int64) bool {
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
	if since < h.rev {
		w.deliver(h.ring)
	}
	h.watchers[w] = struct{}{}
	w.wake()
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
	eventQueue
	hub      *watchHub
	k        *kind
	q        *listQuery
	version  string
	own      bool // copy shared objects for the consumer
	minRev   int64
	cancel   context.CancelFunc
	stopOnce sync.Once

	// Under hub.mu (or before registration).
	wantBookmark bool
}

var _ BatchWatcher = (*hubWatcher)(nil)

func (w *hubWatcher) Stop() { w.stopOnce.Do(w.cancel) }

// deliver queues the events of one round that concern w. hub.mu is held.
func (w *hubWatcher) deliver(evs []*hubEvent) {
	var out [8]queuedEvent
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
		batch = append(batch, queuedEvent{watch.Event{Type: typ, Object: obj}, he.size})
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
func (e *Engine) watchShared(ctx context.Context, k *kind, prefix string, q *listQuery, version string, since int64, initial *initialEvents, timeout time.Duration) (watch.Interface, bool) {
	for range 3 { // a hub that just stopped: take the next one
		h, err := e.hubFor(k, prefix)
		if err != nil {
			return nil, false
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		w := &hubWatcher{eventQueue: newEventQueue(ctx, e.watchBudget, k.res.Plural, initial),
			k: k, q: q, version: version, own: !sharedObjects(ctx), cancel: cancel}
		if initial != nil {
			initial.ctx = wctx
		}
		if !h.join(w, since) {
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
		if q.opts.AllowWatchBookmarks {
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
			w.finish()
		})
		return w, true
	}
	return nil, false
}
