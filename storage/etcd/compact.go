package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compact discards etcd's history up to revision. etcd compacts the whole
// cluster, not only this prefix. Compacting an already compacted revision
// is a no-op.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if _, err := s.client.Compact(ctx, revision); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return s.wrapErr(fmt.Sprintf("compact to %d", revision), err)
	}
	s.noteCompacted(revision)
	return nil
}

// noteCompacted raises the cached compact revision.
func (s *Store) noteCompacted(rev int64) {
	for {
		old := s.compactRev.Load()
		if rev <= old || s.compactRev.CompareAndSwap(old, rev) {
			return
		}
	}
}

// CompactRevision finds etcd's compact revision, which etcd does not
// report directly: it is the oldest revision a range read still accepts.
// The cached value is confirmed with two empty reads; when someone
// compacted meanwhile, a binary search over the revisions finds the new
// one in O(log revision) reads.
func (s *Store) CompactRevision(ctx context.Context) (int64, error) {
	cur, err := s.CurrentRevision(ctx)
	if err != nil {
		return 0, err
	}
	c := min(max(s.compactRev.Load(), 1), cur)
	ok, err := s.readable(ctx, c)
	if err != nil {
		return 0, err
	}
	lo, hi := c+1, cur // the answer is in [lo, hi]; hi is readable
	if ok {
		if c == 1 {
			return 1, nil
		}
		older, err := s.readable(ctx, c-1)
		if err != nil {
			return 0, err
		}
		if !older {
			return c, nil
		}
		lo, hi = 1, c-1 // etcd was restored from an older backup
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := s.readable(ctx, mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	s.compactRev.Store(lo)
	return lo, nil
}

// readable reports whether etcd still serves reads at rev (a future
// revision counts as readable: it is not compacted).
func (s *Store) readable(ctx context.Context, rev int64) (bool, error) {
	_, err := s.get(ctx, s.metaKey, clientv3.WithRev(rev), clientv3.WithCountOnly())
	switch {
	case err == nil, errors.Is(err, rpctypes.ErrFutureRev):
		return true, nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return false, nil
	}
	return false, s.wrapErr("compact revision", err)
}

// compactor compacts etcd every CompactInterval to the revision seen one
// interval earlier, so that at least one interval of history stays for
// resuming watches. Like kube-apiserver's compactor, the replicas sharing
// the cluster take turns through a compare-and-swap on the version of one
// key, so the cluster is compacted once per interval, not once per replica.
func (s *Store) compactor() {
	key := s.prefix + reservedDir + "compact"
	t := time.NewTicker(s.opts.CompactInterval)
	defer t.Stop()
	var version, rev int64
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.CompactInterval/2)
		var err error
		version, rev, err = s.compactOnce(ctx, key, version, rev)
		cancel()
		if err != nil && !s.closed.Load() {
			s.log.Warn("Compacting etcd failed; retrying next interval", "err", err)
		}
	}
}

// compactOnce claims this interval's compaction when the key's version is
// still the one last seen, compacts to the revision recorded one interval
// ago, and returns the key's new version and the revision to compact to
// next time.
func (s *Store) compactOnce(ctx context.Context, key string, version, rev int64) (int64, int64, error) {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(key), "=", version)).
		Then(clientv3.OpPut(key, strconv.FormatInt(rev, 10))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return version, rev, s.wrapErr("compaction turn", err)
	}
	cur := resp.Header.Revision
	if !resp.Succeeded { // another replica compacted this interval
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			return kvs[0].Version, cur, nil
		}
		return 0, cur, nil
	}
	if rev == 0 { // the first turn only records where history starts
		return version + 1, cur, nil
	}
	if err := s.Compact(ctx, rev); err != nil {
		return version + 1, cur, err
	}
	s.log.Debug("Compacted etcd", "revision", rev)
	return version + 1, cur, nil
}
