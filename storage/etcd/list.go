package etcd

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/storage"
)

// List is one etcd range read: a snapshot at opts.Revision (or the latest),
// linearizable, with etcd's own Count (keys in [start, end) at that
// revision, regardless of the limit) and More.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if err := s.checkOpen(); err != nil {
		return storage.ListResult{}, err
	}
	if opts.StartKey != "" && !strings.HasPrefix(opts.StartKey, prefix) {
		return storage.ListResult{}, fmt.Errorf("etcd: list %q: start key %q outside the prefix", prefix, opts.StartKey)
	}
	start := s.key(prefix)
	if opts.StartKey != "" {
		start = s.key(opts.StartKey)
	}
	end := storage.PrefixEnd(s.key(prefix))
	ops := []clientv3.OpOption{clientv3.WithRange(end)}
	if opts.Revision > 0 {
		ops = append(ops, clientv3.WithRev(opts.Revision))
	}
	if opts.Limit > 0 {
		ops = append(ops, clientv3.WithLimit(opts.Limit))
	}
	resp, err := s.get(ctx, start, ops...)
	if err != nil {
		return storage.ListResult{}, s.wrapErr(fmt.Sprintf("list %q at %d", prefix, opts.Revision), err)
	}
	res := storage.ListResult{
		KVs:      make([]storage.KeyValue, len(resp.Kvs)),
		Revision: resp.Header.Revision,
		More:     resp.More,
		Count:    resp.Count,
	}
	if opts.Revision > 0 {
		res.Revision = opts.Revision
	}
	for i := range resp.Kvs {
		res.KVs[i] = s.fromKV(resp, i)
	}
	return res, nil
}
