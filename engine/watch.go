package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasehold/leasehold/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

const (
	// minRequestTimeout is kube-apiserver's --min-request-timeout default:
	// a watch without timeoutSeconds lasts a random 30-60 minutes.
	minRequestTimeout = 1800 * time.Second
	// bookmarkBeforeDeadline: one last bookmark this long before the end.
	bookmarkBeforeDeadline = 2 * time.Second
	// initialEventsEndAnnotation marks the bookmark that ends the initial
	// events of a watch with sendInitialEvents=true.
	initialEventsEndAnnotation = "k8s.io/initial-events-end"
	watchBuffer                = 100
)

// Watch streams changes in the scope's version. Event objects may be
// shared between watchers and must be treated as read-only.
func (e *Engine) Watch(ctx context.Context, s Scope, opts *metav1.ListOptions) (watch.Interface, error) {
	w, err := e.watch(ctx, s, opts)
	if err != nil {
		return nil, toStatus(err)
	}
	return w, nil
}

// engineWatcher implements watch.Interface.
type engineWatcher struct {
	result chan watch.Event
	cancel context.CancelFunc
	once   sync.Once
}

func (w *engineWatcher) ResultChan() <-chan watch.Event { return w.result }
func (w *engineWatcher) Stop()                          { w.once.Do(w.cancel) }

// errorWatcher delivers one ERROR event and ends, as kube-apiserver's
// cacher does for a resourceVersion that is too old.
func errorWatcher(err *apierrors.StatusError) watch.Interface {
	ch := make(chan watch.Event, 1)
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	ch <- watch.Event{Type: watch.Error, Object: &st}
	close(ch)
	return &engineWatcher{result: ch, cancel: func() {}}
}

// watchRun translates one watch's storage events (the per-watch path,
// for watches the shared fan-out cannot serve).
type watchRun struct {
	e       *Engine
	k       *kind
	q       *listQuery
	version string
	own     bool // copy shared objects for the consumer
}

// MaxWatchTimeout is the longest watch, about 68 years: a larger
// timeoutSeconds is clamped to it. Multiplied out, it would overflow
// time.Duration, or the deadline time, and end the watch at once.
const MaxWatchTimeout = math.MaxInt32 * time.Second

// watchTimeout is the watch's duration: timeoutSeconds, clamped to what a
// time.Duration holds, or without it a random 30-60 minutes.
func watchTimeout(seconds *int64) time.Duration {
	timeout := time.Duration(0)
	if seconds != nil {
		if *seconds > int64(MaxWatchTimeout/time.Second) {
			timeout = MaxWatchTimeout
		} else {
			timeout = time.Duration(*seconds) * time.Second
		}
	}
	if timeout <= 0 {
		timeout = time.Duration(float64(minRequestTimeout) * (rand.Float64() + 1))
	}
	return timeout
}

func (e *Engine) watch(ctx context.Context, s Scope, opts *metav1.ListOptions) (watch.Interface, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, err
	}
	q, err := parseListOptions(k, opts, true)
	if err != nil {
		return nil, err
	}
	rv, err := parseRV(q.opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	timeout := watchTimeout(q.opts.TimeoutSeconds)
	prefix := k.listPrefix(s.Namespace)
	since := rv
	var initial *initialEvents
	if q.opts.SendInitialEvents != nil && *q.opts.SendInitialEvents {
		if err := e.waitForRV(ctx, rv); err != nil {
			return nil, err
		}
		// The first page is read now, for its revision and so that a
		// failing store answers the request; the rest is read as the
		// consumer takes the events.
		res, err := e.store.List(ctx, prefix, storage.ListOptions{Limit: initialFirstPage})
		if err != nil {
			return nil, storageError(err)
		}
		since = res.Revision
		// The response's headers go out before the events, so only the
		// first page's damaged records can be named in a Warning; later
		// pages' are skipped and reported in the log and metrics alone.
		for i := range res.KVs {
			if _, err := k.decode(res.KVs[i].Value, res.KVs[i].ModRevision); err != nil {
				AddWarning(ctx, k.skippedWarning(res.KVs[i].Key))
			}
		}
		initial = &initialEvents{e: e, k: k, q: q, version: s.Version, prefix: prefix, rev: since,
			page: res.KVs, more: res.More, pageLimit: initialFirstPage, bookmark: q.opts.AllowWatchBookmarks}
	}
	if w, ok := e.watchShared(ctx, k, prefix, q, s.Version, since, initial, timeout); ok {
		return w, nil
	}

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	// The watch ends with the request too.
	stopOnParent := context.AfterFunc(ctx, cancel)
	sw, err := e.store.Watch(wctx, prefix, since)
	if err != nil {
		stopOnParent()
		cancel()
		if errors.Is(err, storage.ErrCompacted) {
			compacted, _ := e.store.CompactRevision(ctx)
			return errorWatcher(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, compacted))), nil
		}
		return nil, storageError(err)
	}
	if initial != nil {
		initial.ctx = wctx
	}
	w := &storeWatcher{eventQueue: newEventQueue(ctx, e.watchBudget, k.res.Plural, initial), cancel: cancel}
	run := &watchRun{e: e, k: k, q: q, version: s.Version, own: !sharedObjects(ctx)}
	context.AfterFunc(wctx, func() {
		stopOnParent()
		w.finish()
	})
	go func() {
		defer sw.Stop()
		defer w.closeQueue()
		run.loop(wctx, sw, w, q.opts.AllowWatchBookmarks, timeout)
	}()
	return w, nil
}

// storeWatcher is a watch with its own storage watch (the per-watch
// path). Its goroutine drains the storage watch into the queue as events
// come, so what a slow client leaves behind is counted and bounded here,
// not in the store's buffers.
type storeWatcher struct {
	eventQueue
	cancel   context.CancelFunc
	stopOnce sync.Once
}

var _ BatchWatcher = (*storeWatcher)(nil)

func (w *storeWatcher) Stop() { w.stopOnce.Do(w.cancel) }

// loop translates storage events into the queue until the watch ends or
// falls behind.
func (r *watchRun) loop(ctx context.Context, sw storage.Watcher, w *storeWatcher, bookmarks bool, timeout time.Duration) {
	var tick <-chan time.Time
	var final <-chan time.Time
	if bookmarks {
		t := time.NewTicker(r.e.bookmarkInterval)
		defer t.Stop()
		tick = t.C
		if timeout > bookmarkBeforeDeadline {
			f := time.NewTimer(timeout - bookmarkBeforeDeadline)
			defer f.Stop()
			final = f.C
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			sw.RequestProgress()
		case <-final:
			sw.RequestProgress()
		case resp, ok := <-sw.ResultChan():
			if !ok {
				return
			}
			if resp.Err != nil {
				if !errors.Is(resp.Err, context.Canceled) && !errors.Is(resp.Err, context.DeadlineExceeded) {
					r.e.log.DebugContext(ctx, "watch ended by storage", "resource", r.k.res.Plural, "error", resp.Err)
				}
				return
			}
			if len(resp.Events) == 0 {
				if bookmarks && !w.push(queuedEvent{watch.Event{Type: watch.Bookmark, Object: r.bookmark(resp.Revision, false)}, eventOverhead}) {
					return
				}
				continue
			}
			for _, ev := range resp.Events {
				typ, obj, err := r.translate(ev)
				if err != nil {
					continue // skipped; the decode cache has reported it
				}
				if obj != nil && !w.push(queuedEvent{watch.Event{Type: typ, Object: obj}, storedEventSize(&ev)}) {
					return
				}
			}
		}
	}
}

// storedEventSize is what one event counts against the watch budgets: the
// stored size of the object it carries, plus the queue's overhead.
func storedEventSize(ev *storage.Event) int64 {
	if ev.Type == storage.EventDelete && ev.PrevKV != nil {
		return int64(len(ev.PrevKV.Value)) + eventOverhead
	}
	return int64(len(ev.KV.Value)) + eventOverhead
}

// initialFirstPage is how many objects the first page of initial events
// reads; later pages are sized to initialPageBytes by what the previous
// one held.
const initialFirstPage = 32

// initialEvents reads a watch's initial events (sendInitialEvents) from
// the store's snapshot at rev, a page at a time as the consumer takes
// them: a watch of a large collection holds one page, never the whole
// collection, and a client that does not read makes it read nothing.
type initialEvents struct {
	ctx     context.Context
	e       *Engine
	k       *kind
	q       *listQuery
	version string
	prefix  string
	rev     int64
	// page is the unread rest of the current page; more reports keys
	// after it, from next on.
	page      []storage.KeyValue
	more      bool
	next      string
	pageLimit int64
	// bookmark: end with the initial-events-end bookmark.
	bookmark bool
}

// take appends about maxBytes of initial events (at least one, unless
// none is left) to dst; done reports that all were given. A page read
// that fails (the snapshot was compacted, the store closed) ends them
// with err.
func (c *initialEvents) take(dst []watch.Event, maxBytes int) (_ []watch.Event, done bool, err error) {
	var taken int
	for {
		for len(c.page) > 0 {
			kv := &c.page[0]
			if taken > 0 && taken+len(kv.Value) > maxBytes {
				return dst, false, nil
			}
			taken += len(kv.Value) + eventOverhead
			c.next = kv.Key + "\x00"
			o, err := c.k.decode(kv.Value, kv.ModRevision)
			if err != nil {
				// Reported once per record (log, metric, /readyz detail)
				// and skipped, as LIST skips it.
				c.e.noteUndecodable(context.Background(), *kv, err)
			}
			c.page[0] = storage.KeyValue{}
			c.page = c.page[1:]
			if err != nil {
				continue
			}
			if c.q.matches(o) {
				dst = append(dst, watch.Event{Type: watch.Added, Object: c.k.fromStorage(o, c.version)})
			}
		}
		if !c.more {
			if c.bookmark {
				c.bookmark = false
				r := watchRun{k: c.k, version: c.version}
				dst = append(dst, watch.Event{Type: watch.Bookmark, Object: r.bookmark(c.rev, true)})
			}
			return dst, true, nil
		}
		if taken >= maxBytes {
			return dst, false, nil
		}
		res, err := c.e.store.List(c.ctx, c.prefix, storage.ListOptions{Revision: c.rev, StartKey: c.next, Limit: c.pageLimit})
		if err != nil {
			return dst, true, err
		}
		c.page, c.more = res.KVs, res.More
		var size int
		for i := range res.KVs {
			size += len(res.KVs[i].Value) + eventOverhead
		}
		if len(res.KVs) > 0 {
			c.pageLimit = int64(min(max(initialPageBytes/(size/len(res.KVs)), 1), 1000))
		}
	}
}

// bookmark is an empty object carrying only the resourceVersion (and the
// initial-events-end annotation).
func (r *watchRun) bookmark(rev int64, initialEnd bool) runtime.Object {
	o := r.k.newObj()
	o.SetResourceVersion(formatRV(rev))
	if initialEnd {
		o.SetAnnotations(map[string]string{initialEventsEndAnnotation: "true"})
	}
	return r.k.fromStorage(o, r.version)
}

// translate turns one storage event into a watch event under the
// selectors: an object that starts matching is ADDED, one that stops
// matching is DELETED (old object, new revision), like the cacher.
func (r *watchRun) translate(ev storage.Event) (watch.EventType, runtime.Object, error) {
	cache := r.e.decoded
	switch ev.Type {
	case storage.EventPut:
		cur, err := cache.get(r.k, ev.KV.Key, ev.KV.ModRevision, ev.KV.Value)
		if err != nil {
			return "", nil, err
		}
		curMatch := r.q.matches(cur)
		if ev.PrevKV == nil {
			if curMatch {
				return watch.Added, r.k.fromStorage(r.copyOf(cur), r.version), nil
			}
			return "", nil, nil
		}
		prevMatch := true
		var prev object
		if !r.q.empty() {
			if prev, err = cache.get(r.k, ev.PrevKV.Key, ev.PrevKV.ModRevision, ev.PrevKV.Value); err != nil {
				return "", nil, err
			}
			prevMatch = r.q.matches(prev)
		}
		switch {
		case curMatch && prevMatch:
			return watch.Modified, r.k.fromStorage(r.copyOf(cur), r.version), nil
		case curMatch:
			return watch.Added, r.k.fromStorage(r.copyOf(cur), r.version), nil
		case prevMatch:
			return watch.Deleted, r.deleted(prev, ev.KV.ModRevision), nil
		}
		return "", nil, nil
	case storage.EventDelete:
		if ev.PrevKV == nil {
			return "", nil, nil
		}
		prev, err := cache.get(r.k, ev.PrevKV.Key, ev.PrevKV.ModRevision, ev.PrevKV.Value)
		if err != nil {
			return "", nil, err
		}
		if !r.q.matches(prev) {
			return "", nil, nil
		}
		return watch.Deleted, r.deleted(prev, ev.KV.ModRevision), nil
	}
	return "", nil, nil
}

// deleted is the last state of an object with the deletion's revision.
func (r *watchRun) deleted(prev object, rev int64) runtime.Object {
	o := prev.DeepCopyObject().(object)
	o.SetResourceVersion(formatRV(rev))
	return r.k.fromStorage(o, r.version)
}

// copyOf is ShallowCopy unless the consumer takes shared objects as they are.
func (r *watchRun) copyOf(o object) object {
	if !r.own {
		return o
	}
	return ShallowCopy(o).(object)
}
