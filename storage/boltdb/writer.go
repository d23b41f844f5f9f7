package boltdb

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/leasehold/leasehold/storage"
)

type opKind uint8

const (
	opCreate opKind = iota + 1
	opUpdate
	opDelete
)

// op is one queued write. Ops are pooled: with done buffered, a round
// answers callers without blocking and without allocating channels.
type op struct {
	kind     opKind
	key      string
	value    []byte
	expected int64

	// Results, valid once done has fired.
	kv   storage.KeyValue
	prev storage.KeyValue
	err  error

	rec  []byte // encoded bbolt record (accepted puts)
	done chan struct{}
}

var opPool = sync.Pool{New: func() any { return &op{done: make(chan struct{}, 1)} }}

// submit queues o and waits for its round. The wait ignores ctx once the op
// is queued: its outcome is decided by the commit, and answering early would
// hide whether the write happened.
func (s *Store) submit(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	if s.closed.Load() {
		s.closeMu.RUnlock()
		return storage.ErrClosed
	}
	s.queue <- o
	s.closeMu.RUnlock()
	<-o.done
	return o.err
}

func (s *Store) newOp(kind opKind, key string, value []byte, expected int64) (*op, error) {
	if len(value) > s.opts.MaxValueBytes {
		return nil, fmt.Errorf("write %q: %d bytes exceeds %d: %w", key, len(value), s.opts.MaxValueBytes, storage.ErrValueTooLarge)
	}
	o := opPool.Get().(*op)
	o.kind, o.key, o.value, o.expected = kind, key, value, expected
	return o, nil
}

func releaseOp(o *op) {
	done := o.done
	*o = op{done: done}
	opPool.Put(o)
}

// Create stores a new key.
func (s *Store) Create(ctx context.Context, key string, value []byte) (storage.KeyValue, error) {
	o, err := s.newOp(opCreate, key, value, 0)
	if err != nil {
		return storage.KeyValue{}, err
	}
	err = s.submit(ctx, o)
	kv := o.kv
	releaseOp(o)
	return kv, err
}

// Update replaces key's value if its ModRevision equals expectedModRevision.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedModRevision int64) (storage.KeyValue, error) {
	o, err := s.newOp(opUpdate, key, value, expectedModRevision)
	if err != nil {
		return storage.KeyValue{}, err
	}
	err = s.submit(ctx, o)
	kv := o.kv
	releaseOp(o)
	return kv, err
}

// Delete removes key if its ModRevision equals expectedModRevision (0: any).
func (s *Store) Delete(ctx context.Context, key string, expectedModRevision int64) (storage.KeyValue, int64, error) {
	o, _ := s.newOp(opDelete, key, nil, expectedModRevision)
	err := s.submit(ctx, o)
	prev, rev := o.prev, o.kv.ModRevision
	releaseOp(o)
	return prev, rev, err
}

// writer is the single goroutine that commits rounds until the queue is
// closed and drained.
func (s *Store) writer() {
	defer close(s.writerDone)
	r := newRound(s.opts.MaxBatch)
	var delay *time.Timer
	if s.opts.CommitDelay > 0 {
		delay = time.NewTimer(s.opts.CommitDelay)
		delay.Stop()
	}
	for first := range s.queue {
		r.ops = append(r.ops[:0], first)
		if delay != nil {
			s.gather(r, delay)
		}
	drain:
		for len(r.ops) < s.opts.MaxBatch {
			select {
			case o, ok := <-s.queue:
				if !ok {
					break drain
				}
				r.ops = append(r.ops, o)
			default:
				break drain
			}
		}
		s.commit(r)
	}
}

// gather adds the writes that arrive within Options.CommitDelay of the
// round's first one (or until the round is full or the queue closes).
func (s *Store) gather(r *round, delay *time.Timer) {
	delay.Reset(s.opts.CommitDelay)
	defer delay.Stop()
	for len(r.ops) < s.opts.MaxBatch {
		select {
		case o, ok := <-s.queue:
			if !ok {
				return
			}
			r.ops = append(r.ops, o)
		case <-delay.C:
			return
		}
	}
}

// round is the writer's reusable scratch space.
type round struct {
	ops     []*op
	events  []storage.Event
	overlay map[string]storage.KeyValue // state after earlier ops of the round
	deleted map[string]bool
}

func newRound(n int) *round {
	return &round{
		ops:     make([]*op, 0, n),
		overlay: make(map[string]storage.KeyValue),
		deleted: make(map[string]bool),
	}
}

// lookup reads key as seen after the earlier ops of this round.
func (s *Store) lookup(r *round, key string) (storage.KeyValue, bool) {
	if kv, ok := r.overlay[key]; ok {
		return kv, true
	}
	if r.deleted[key] {
		return storage.KeyValue{}, false
	}
	return s.snap.Load().index.get(key) // only this goroutine publishes

}

// commit validates, persists, publishes and answers one round.
func (s *Store) commit(r *round) {
	clear(r.overlay)
	clear(r.deleted)
	r.events = r.events[:0]
	rev := s.snap.Load().rev // only the writer changes the revision
	data := s.snap.Load().data

	for _, o := range r.ops {
		cur, exists := s.lookup(r, o.key)
		switch o.kind {
		case opCreate:
			if exists {
				o.err = fmt.Errorf("create %q: %w", o.key, storage.ErrKeyExists)
				continue
			}
			if o.err = s.checkQuota(&data, o, nil); o.err != nil {
				continue
			}
			rev++
			var val []byte
			o.rec, val = encodeRecord(rev, rev, o.value)
			o.kv = storage.KeyValue{Key: o.key, Value: val, CreateRevision: rev, ModRevision: rev}
			r.events = append(r.events, storage.Event{Type: storage.EventPut, KV: o.kv})
		case opUpdate:
			if !exists {
				o.err = fmt.Errorf("update %q: %w", o.key, storage.ErrNotFound)
				continue
			}
			if cur.ModRevision != o.expected {
				o.err = fmt.Errorf("update %q at %d (current %d): %w", o.key, o.expected, cur.ModRevision, storage.ErrConflict)
				continue
			}
			if o.err = s.checkQuota(&data, o, &cur); o.err != nil {
				continue
			}
			rev++
			var val []byte
			o.rec, val = encodeRecord(cur.CreateRevision, rev, o.value)
			o.kv = storage.KeyValue{Key: o.key, Value: val, CreateRevision: cur.CreateRevision, ModRevision: rev}
			prev := cur
			r.events = append(r.events, storage.Event{Type: storage.EventPut, KV: o.kv, PrevKV: &prev})
		case opDelete:
			if !exists {
				o.err = fmt.Errorf("delete %q: %w", o.key, storage.ErrNotFound)
				continue
			}
			if o.expected != 0 && cur.ModRevision != o.expected {
				o.err = fmt.Errorf("delete %q at %d (current %d): %w", o.key, o.expected, cur.ModRevision, storage.ErrConflict)
				continue
			}
			rev++
			data.add(cur.Key, cur.Value, -1)
			o.prev = cur
			o.kv = storage.KeyValue{Key: o.key, CreateRevision: cur.CreateRevision, ModRevision: rev}
			prev := cur
			r.events = append(r.events, storage.Event{Type: storage.EventDelete, KV: o.kv, PrevKV: &prev})
			delete(r.overlay, o.key)
			r.deleted[o.key] = true
			continue
		}
		r.overlay[o.key] = o.kv
	}

	if len(r.events) > 0 {
		start := time.Now()
		err := s.persist(r, rev)
		if s.opts.OnCommit != nil {
			s.opts.OnCommit(time.Since(start), len(r.events), err)
		}
		if err != nil {
			err = fmt.Errorf("boltdb: commit of %d writes: %w", len(r.events), err)
			s.log.Error("storage commit failed", "err", err)
			s.commitFailed.Store(true)
			for _, o := range r.ops {
				o.err, o.kv, o.prev = err, storage.KeyValue{}, storage.KeyValue{}
			}
		} else {
			s.commits.Add(1)
			s.publish(r, rev, data)
		}
	}
	for i, o := range r.ops {
		o.rec = nil
		o.done <- struct{}{}
		r.ops[i] = nil
	}
}

// checkQuota admits a put of o.value over cur (nil: a new key) into
// data, the round's running count, or refuses it with ErrQuotaExceeded: a
// put that grows the data must keep it within the quota, and one of a
// large value must keep the large values within a quarter of it. A put
// that does not grow the data always passes, so that renewals go on in a
// full store.
func (s *Store) checkQuota(data *dataSize, o *op, cur *storage.KeyValue) error {
	next := *data
	if cur != nil {
		next.add(cur.Key, cur.Value, -1)
	}
	next.add(o.key, o.value, 1)
	quota := s.opts.QuotaBytes
	switch {
	case next.total <= data.total:
	case next.total > quota:
		return fmt.Errorf("write %q: %d bytes of keys and values would pass the storage quota of %d: %w",
			o.key, next.total, quota, storage.ErrQuotaExceeded)
	case len(o.value) > LargeValueBytes && next.large > quota/4:
		return fmt.Errorf("write %q: %d bytes of values over %d bytes would pass a quarter of the storage quota of %d: %w",
			o.key, next.large, LargeValueBytes, quota, storage.ErrQuotaExceeded)
	}
	*data = next
	return nil
}

// persist writes the accepted ops of the round in one fsynced transaction.
func (s *Store) persist(r *round, rev int64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKV)
		for _, o := range r.ops {
			if o.err != nil {
				continue
			}
			var err error
			if o.kind == opDelete {
				err = b.Delete([]byte(o.key))
			} else {
				err = b.Put([]byte(o.key), o.rec)
			}
			if err != nil {
				return fmt.Errorf("key %q: %w", o.key, err)
			}
		}
		return tx.Bucket(bucketMeta).Put(metaRevision, encodeRevision(rev))
	})
}

// publish applies a committed round to a copy of the published snapshot,
// records it in the history, swaps the snapshot in and fans the round out
// to watchers. Readers are never waited for: they keep whichever snapshot
// they loaded. s.mu only orders this against Compact, the idle trim and
// watch registration, so that a new watcher sees each round exactly once.
func (s *Store) publish(r *round, rev int64, data dataSize) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	next := *s.snap.Load()
	for i := range r.events {
		e := &r.events[i]
		if e.Type == storage.EventDelete {
			next.index, _ = next.index.del(e.KV.Key)
		} else {
			next.index, _ = next.index.put(e.KV)
		}
		next.hist.push(histEvent{ev: *e, round: rev, at: now.UnixNano()})
	}
	next.rev, next.data = rev, data
	s.trim(&next, now)
	s.snap.Store(&next)
	if len(s.watchers) > 0 {
		// Watchers keep the slice; the scratch buffer must not be reused.
		evs := slices.Clone(r.events)
		for w := range s.watchers {
			w.deliver(evs, rev)
		}
	}
}
