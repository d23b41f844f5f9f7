package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/storage"
)

// watcher is one open watch: an etcd watch from a known revision, with
// PrevKV, relayed by one goroutine through a queue capped at
// Options.WatchQueueLimit. The etcd client buffers without bound, so a
// client that stops reading is ended with ErrCompacted (it relists)
// instead of growing memory.
type watcher struct {
	s        *Store
	prefix   string
	out      chan storage.WatchResponse
	progress chan struct{} // capacity 1: "a progress notification is wanted"
	stopCh   chan struct{}
	stop     sync.Once
}

// Watch starts an etcd watch at sinceRevision+1. A watch from now first
// reads the current revision, so that every write acknowledged after
// Watch returns is delivered (etcd creates watches asynchronously). A
// compacted sinceRevision fails here, before any goroutine starts.
func (s *Store) Watch(ctx context.Context, prefix string, sinceRevision int64) (storage.Watcher, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if sinceRevision == 0 {
		rev, err := s.CurrentRevision(ctx)
		if err != nil {
			return nil, err
		}
		sinceRevision = rev
	} else {
		ok, err := s.readable(ctx, sinceRevision)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("etcd: watch %q from %d: %w", prefix, sinceRevision, storage.ErrCompacted)
		}
	}
	w := &watcher{
		s:        s,
		prefix:   prefix,
		out:      make(chan storage.WatchResponse, 16),
		progress: make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
	}
	go w.run(ctx, sinceRevision)
	return w, nil
}

func (w *watcher) ResultChan() <-chan storage.WatchResponse { return w.out }

func (w *watcher) Stop() { w.stop.Do(func() { close(w.stopCh) }) }

// RequestProgress asks etcd for a progress notification on this watch's
// stream. etcd answers after the events it has already sent (etcd before
// 3.4.24/3.5.8 may answer a watch still replaying history early:
// etcd-io/etcd#15220).
func (w *watcher) RequestProgress() {
	select {
	case w.progress <- struct{}{}:
	default:
	}
}

// watchCtx gives every watch of the store one gRPC stream that fails over
// when its member loses the cluster leader (instead of hanging on a
// partitioned member); RequestProgress must use the same metadata to reach
// that stream.
func watchCtx(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

// run relays etcd's responses until the watch ends.
func (w *watcher) run(ctx context.Context, since int64) {
	defer close(w.out)
	var (
		last    = since // every matching event up to last is queued
		queue   []storage.WatchResponse
		ended   bool // a terminal response is queued
		pending bool // a progress notification was asked for
		cancel  context.CancelFunc
		ch      clientv3.WatchChan
		retry   <-chan time.Time
		done    = w.s.done
	)
	start := func() {
		var wctx context.Context
		wctx, cancel = context.WithCancel(watchCtx(ctx))
		key := w.s.key(w.prefix)
		ch = w.s.client.Watch(wctx, key, clientv3.WithRange(storage.PrefixEnd(key)),
			clientv3.WithRev(last+1), clientv3.WithPrevKV())
	}
	end := func(err error) {
		queue = append(queue[:0], storage.WatchResponse{Err: err, Revision: last})
		ended, ch, retry, done = true, nil, nil, nil
		cancel()
	}
	start()
	defer func() { cancel() }()
	for {
		var out chan<- storage.WatchResponse
		var head storage.WatchResponse
		if len(queue) > 0 {
			out, head = w.out, queue[0]
		}
		select {
		case out <- head:
			queue[0] = storage.WatchResponse{}
			queue = queue[1:]
			if ended && len(queue) == 0 {
				return
			}
		case <-w.stopCh:
			return
		case <-ctx.Done():
			return
		case <-done:
			end(storage.ErrClosed)
		case <-w.progress:
			pending = true
			go w.requestProgress()
		case <-retry:
			retry = nil
			start()
		case resp, ok := <-ch:
			switch {
			case !ok:
				if ctx.Err() != nil {
					return
				}
				if w.s.closed.Load() {
					end(storage.ErrClosed)
				} else {
					end(fmt.Errorf("etcd: watch %q: channel closed", w.prefix))
				}
			case resp.CompactRevision != 0:
				w.s.noteCompacted(resp.CompactRevision)
				end(fmt.Errorf("etcd: watch %q from %d (compacted %d): %w", w.prefix, last, resp.CompactRevision, storage.ErrCompacted))
			case errors.Is(resp.Err(), rpctypes.ErrNoLeader) && w.s.opts.EndWatchesWithoutLeader:
				end(w.s.wrapErr("watch "+w.prefix, resp.Err()))
			case errors.Is(resp.Err(), rpctypes.ErrNoLeader):
				// The member lost its leader: resume from the last
				// revision on another member once the client moved.
				cancel()
				ch, retry = nil, time.After(200*time.Millisecond)
			case resp.Err() != nil:
				end(w.s.wrapErr("watch "+w.prefix, resp.Err()))
			case resp.IsProgressNotify():
				if pending && resp.Header.Revision >= last {
					pending, last = false, resp.Header.Revision
					queue = append(queue, storage.WatchResponse{Revision: last})
				}
			default:
				queue = w.appendEvents(queue, resp.Events)
				if n := len(resp.Events); n > 0 {
					last = resp.Events[n-1].Kv.ModRevision
				}
				if len(queue) > w.s.opts.WatchQueueLimit {
					end(fmt.Errorf("etcd: watch %q: client %d responses behind: %w", w.prefix, len(queue), storage.ErrCompacted))
				}
			}
		}
	}
}

func (w *watcher) requestProgress() {
	ctx, cancel := context.WithTimeout(watchCtx(context.Background()), w.s.opts.DialTimeout)
	defer cancel()
	if err := w.s.client.RequestProgress(ctx); err != nil && !w.s.closed.Load() {
		w.s.log.Debug("Watch progress request failed", "prefix", w.prefix, "err", err)
	}
}

// appendEvents converts etcd events into one response per revision (the
// events of one etcd transaction share it).
func (w *watcher) appendEvents(queue []storage.WatchResponse, evs []*clientv3.Event) []storage.WatchResponse {
	for i := 0; i < len(evs); {
		rev := evs[i].Kv.ModRevision
		var batch []storage.Event
		for ; i < len(evs) && evs[i].Kv.ModRevision == rev; i++ {
			batch = append(batch, w.convert(evs[i]))
		}
		queue = append(queue, storage.WatchResponse{Events: batch, Revision: rev})
	}
	return queue
}

func (w *watcher) convert(ev *clientv3.Event) storage.Event {
	key := strings.TrimPrefix(string(ev.Kv.Key), w.s.prefix)
	e := storage.Event{Type: storage.EventPut, KV: storage.KeyValue{
		Key: key, Value: ev.Kv.Value, CreateRevision: ev.Kv.CreateRevision, ModRevision: ev.Kv.ModRevision,
	}}
	if p := ev.PrevKv; p != nil {
		e.PrevKV = &storage.KeyValue{Key: key, Value: p.Value, CreateRevision: p.CreateRevision, ModRevision: p.ModRevision}
	}
	if ev.Type == clientv3.EventTypeDelete {
		e.Type = storage.EventDelete
		e.KV.Value = nil
		if e.PrevKV != nil {
			e.KV.CreateRevision = e.PrevKV.CreateRevision
		}
	}
	return e
}
