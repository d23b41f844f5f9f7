package boltdb

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/leasehold/leasehold/storage"
)

// List returns the keys under prefix at opts.Revision (0: latest). An older
// revision is served by undoing the newer retained events on top of the
// current state, under one read lock, so the page is a consistent snapshot.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if s.closed.Load() {
		return storage.ListResult{}, storage.ErrClosed
	}
	if opts.StartKey != "" && !strings.HasPrefix(opts.StartKey, prefix) {
		return storage.ListResult{}, fmt.Errorf("list %q: start key %q is outside the prefix", prefix, opts.StartKey)
	}
	start := max(prefix, opts.StartKey)
	end := storage.PrefixEnd(prefix)

	s.mu.RLock()
	defer s.mu.RUnlock()
	rev := opts.Revision
	switch {
	case rev == 0 || rev == s.rev:
		return s.listCurrent(start, end, opts.Limit), nil
	case rev > s.rev:
		return storage.ListResult{}, fmt.Errorf("list %q at %d (current %d): %w", prefix, rev, s.rev, storage.ErrFutureRevision)
	case rev < s.compactRev:
		return storage.ListResult{}, fmt.Errorf("list %q at %d (compacted %d): %w", prefix, rev, s.compactRev, storage.ErrCompacted)
	}
	return s.listAt(start, end, opts.Limit, rev), nil
}

// bounds returns the index range of s.keys within [start, end).
func (s *Store) bounds(start, end string) (lo, hi int) {
	lo = sort.SearchStrings(s.keys, start)
	hi = len(s.keys)
	if end != "" {
		hi = lo + sort.SearchStrings(s.keys[lo:], end)
	}
	return lo, hi
}

func (s *Store) listCurrent(start, end string, limit int64) storage.ListResult {
	lo, hi := s.bounds(start, end)
	n := hi - lo
	res := storage.ListResult{Revision: s.rev, Count: int64(n)}
	if limit > 0 && int64(n) > limit {
		n, res.More = int(limit), true
	}
	res.KVs = make([]storage.KeyValue, n)
	for i, k := range s.keys[lo : lo+n] {
		res.KVs[i] = s.kvs[k]
	}
	return res
}

// listAt rebuilds the snapshot at rev: walking the events after rev from
// newest to oldest, the last PrevKV seen for a key is its state at rev
// (nil when the key did not exist then).
func (s *Store) listAt(start, end string, limit, rev int64) storage.ListResult {
	inRange := func(k string) bool { return k >= start && (end == "" || k < end) }
	past := make(map[string]*storage.KeyValue)
	for i := s.hist.len() - 1; i >= int(rev-s.compactRev); i-- {
		e := &s.hist.get(i).ev
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

	lo, hi := s.bounds(start, end)
	cur := s.keys[lo:hi]
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
	i, j := 0, 0
	for i < len(cur) || j < len(changed) {
		if i < len(cur) {
			if _, touched := past[cur[i]]; touched {
				i++ // its state at rev comes from changed (or it did not exist)
				continue
			}
		}
		if j >= len(changed) || (i < len(cur) && cur[i] < changed[j]) {
			emit(s.kvs[cur[i]])
			i++
		} else {
			emit(*past[changed[j]])
			j++
		}
	}
	if res.KVs == nil {
		res.KVs = []storage.KeyValue{}
	}
	return res
}
