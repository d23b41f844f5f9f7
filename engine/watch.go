package engine

import (
	"context"
	"errors"
	"fmt"
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

// watchRun is one running watch.
type watchRun struct {
	e         *Engine
	k         *kind
	q         *listQuery
	version   string
	bookmarks bool
	own       bool // copy shared objects for the consumer
	out       chan watch.Event
}

func (e *Engine) watch(ctx context.Context, s Scope, opts *metav1.ListOptions) (watch.Interface, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, err
	}
	q, err := parseListOptions(opts, true)
	if err != nil {
		return nil, err
	}
	rv, err := parseRV(q.opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(0)
	if q.opts.TimeoutSeconds != nil {
		timeout = time.Duration(*q.opts.TimeoutSeconds) * time.Second
	}
	if timeout <= 0 {
		timeout = time.Duration(float64(minRequestTimeout) * (rand.Float64() + 1))
	}
	prefix := k.listPrefix(s.Namespace)
	initial := q.opts.SendInitialEvents != nil && *q.opts.SendInitialEvents

	var initialItems []object
	since := rv
	if initial {
		if err := e.waitForRV(ctx, rv); err != nil {
			return nil, err
		}
		res, err := e.store.List(ctx, prefix, storage.ListOptions{})
		if err != nil {
			return nil, storageError(err)
		}
		for _, kv := range res.KVs {
			o, err := k.decode(kv.Value, kv.ModRevision)
			if err != nil {
				e.noteUndecodable(ctx, kv, err)
				AddWarning(ctx, k.skippedWarning(kv.Key))
				continue
			}
			if q.matches(o) {
				initialItems = append(initialItems, o)
			}
		}
		since = res.Revision
	}
	var initialEvents []watch.Event
	if initial {
		initialEvents = make([]watch.Event, 0, len(initialItems)+1)
		r := watchRun{k: k, version: s.Version}
		for _, o := range initialItems {
			initialEvents = append(initialEvents, watch.Event{Type: watch.Added, Object: k.fromStorage(o, s.Version)})
		}
		if q.opts.AllowWatchBookmarks {
			initialEvents = append(initialEvents, watch.Event{Type: watch.Bookmark, Object: r.bookmark(since, true)})
		}
	}
	if w, ok := e.watchShared(ctx, k, prefix, q, s.Version, since, initialEvents, timeout); ok {
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
	w := &engineWatcher{result: make(chan watch.Event, watchBuffer), cancel: cancel}
	run := &watchRun{e: e, k: k, q: q, version: s.Version, bookmarks: q.opts.AllowWatchBookmarks, out: w.result, own: !sharedObjects(ctx)}
	go func() {
		defer stopOnParent()
		defer cancel()
		defer close(w.result)
		defer sw.Stop()
		run.loop(wctx, sw, initial, initialItems, since, timeout)
	}()
	return w, nil
}

// loop sends the initial events, then translates storage events until the
// watch ends.
func (r *watchRun) loop(ctx context.Context, sw storage.Watcher, initial bool, items []object, since int64, timeout time.Duration) {
	if initial {
		for _, o := range items {
			if !r.send(ctx, watch.Added, r.k.fromStorage(o, r.version)) {
				return
			}
		}
		if r.bookmarks && !r.send(ctx, watch.Bookmark, r.bookmark(since, true)) {
			return
		}
	}
	var tick <-chan time.Time
	var final <-chan time.Time
	if r.bookmarks {
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
				if r.bookmarks && !r.send(ctx, watch.Bookmark, r.bookmark(resp.Revision, false)) {
					return
				}
				continue
			}
			for _, ev := range resp.Events {
				typ, obj, err := r.translate(ev)
				if err != nil {
					continue // skipped; the decode cache has reported it
				}
				if obj != nil && !r.send(ctx, typ, obj) {
					return
				}
			}
		}
	}
}

func (r *watchRun) send(ctx context.Context, typ watch.EventType, obj runtime.Object) bool {
	select {
	case r.out <- watch.Event{Type: typ, Object: obj}:
		return true
	case <-ctx.Done():
		return false
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
