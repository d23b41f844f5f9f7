package boltdb

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/storage"
)

// List returns the keys under prefix at opts.Revision (0: latest). It
// reads one published snapshot, without any lock, so the page is
// consistent however long it takes and the writer never waits for it. An
// older revision is served by undoing the snapshot's newer retained
// events on top of its state.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if s.closed.Load() {
		return storage.ListResult{}, storage.ErrClosed
	}
	if opts.StartKey != "" && !strings.HasPrefix(opts.StartKey, prefix) {
		return storage.ListResult{}, fmt.Errorf("list %q: start key %q is outside the prefix", prefix, opts.StartKey)
	}
	start := max(prefix, opts.StartKey)
	end := storage.PrefixEnd(prefix)

	sn := s.snap.Load()
	rev := opts.Revision
	switch {
	case rev == 0 || rev == sn.rev:
		return s.listCurrent(sn, start, end, opts.Limit), nil
	case rev > sn.rev:
		return storage.ListResult{}, fmt.Errorf("list %q at %d (current %d): %w", prefix, rev, sn.rev, storage.ErrFutureRevision)
	case rev < sn.compactRev:
		return storage.ListResult{}, fmt.Errorf("list %q at %d (compacted %d): %w", prefix, rev, sn.compactRev, storage.ErrCompacted)
	}
	return s.listAt(sn, start, end, opts.Limit, rev), nil
}

func (s *Store) listCurrent(sn *snapshot, start, end string, limit int64) storage.ListResult {
	n := sn.index.count(start, end)
	res := storage.ListResult{Revision: sn.rev, Count: int64(n)}
	if limit > 0 && int64(n) > limit {
		n, res.More = int(limit), true
	}
	res.KVs = make([]storage.KeyValue, 0, n)
	sn.index.ascend(start, end, func(kv *storage.KeyValue) bool {
		if len(res.KVs) == n {
			return false
		}
		if len(res.KVs) == n/2 && s.listPause != nil {
			s.listPause() // tests: a List caught halfway through
		}
		res.KVs = append(res.KVs, *kv)
		return true
	})
	return res
}

// listAt rebuilds the snapshot at rev: walking the events after rev from
// newest to oldest, the last PrevKV seen for a key is its state at rev
// (nil when the key did not exist then).
func (s *Store) listAt(sn *snapshot, start, end string, limit, rev int64) storage.ListResult {
	inRange := func(k string) bool { return k >= start && (end == "" || k < end) }
	past := make(map[string]*storage.KeyValue)
	for i := sn.hist.len() - 1; i >= int(rev-sn.compactRev); i-- {
		e := &sn.hist.get(i).ev
		if inRange(e.KV.Key) {
			past[e.KV.Key] = e.PrevKV
		}
	}
	changed := make([]string, 0, len(past))
	for k, kv := range past {
		if kv != nil {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)

	res := storage.ListResult{Revision: rev}
	// Merge the current keys untouched since rev with the restored ones.
	emit := func(kv storage.KeyValue) {
		res.Count++
		if limit > 0 && int64(len(res.KVs)) >= limit {
			res.More = true
			return
		}
		res.KVs = append(res.KVs, kv)
	}
	j := 0
	sn.index.ascend(start, end, func(kv *storage.KeyValue) bool {
		if _, touched := past[kv.Key]; touched {
			return true // its state at rev comes from changed (or it did not exist)
		}
		for ; j < len(changed) && changed[j] < kv.Key; j++ {
			emit(*past[changed[j]])
		}
		emit(*kv)
		return true
	})
	for ; j < len(changed); j++ {
		emit(*past[changed[j]])
	}
	if res.KVs == nil {
		res.KVs = []storage.KeyValue{}
	}
	return res
}
