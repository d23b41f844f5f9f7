package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/storage"
)

// A write sent but not answered has an unknown outcome: its raft leader
// was replaced while it waited (a member's own store ends it then, see
// leaderchange.go; the pool when it sees a new term), its connection was
// lost, or etcd gave up on it. Answering that as a 504 sends the client
// to re-read and retry; a lease holder renewing through it misses a
// renewal for nothing, and on a busy 2-core device an election is not
// rare. While the request has time left, Create and Update settle the
// outcome instead, by what became of the key:
//
//   - A linearizable read comes first. Its ReadIndex is served only once
//     the current leader has committed an entry of its own term, and with
//     it every earlier entry that will ever commit: an entry of the old
//     term that is not applied by then never will be.
//   - The key unchanged since the revision the write compared against:
//     the write was not applied, and is sent again. Its compare still
//     holds, so exactly one of the two sends can apply, whichever it is.
//   - The key changed since: the first change after that revision (a
//     watch from the next one replays it) is the write's own when it put
//     the write's very value; the write then succeeded. Any other first
//     change means another writer came first: the write's compare failed,
//     a conflict (or, for a create, the key exists).
//
// A client that writes byte-identical values from two places (two CAS of
// one revision with one value) may be told both succeeded; the store then
// holds exactly what each was told it holds. A history compacted past the
// revision leaves the outcome unknown, as before.

// settleAttempts bounds the sends again of one write.
const settleAttempts = 3

// settleable reports whether err leaves a write's outcome unknown in a
// way that settling can resolve: not the caller's own deadline.
func settleable(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && timedOut(err) && !errors.Is(err, context.Canceled)
}

// settleCAS settles a compare-and-swap of key k that compared its mod
// revision (Update; Create compares against 0 with expected 0 and
// created true) and put value. send sends the write again. It returns the
// written key's revisions, or the error to answer: storage.ErrConflict,
// storage.ErrNotFound, storage.ErrKeyExists, or cause when the outcome
// stays unknown.
//
// began is when the write was first sent: the write and its settling
// together take at most Options.RequestTimeout, so that a client is
// answered within it as before (a write that waited out the timeout is
// not settled).
func (s *Store) settleCAS(ctx context.Context, began time.Time, k string, value []byte, expected int64, create bool,
	send func(context.Context) (*clientv3.TxnResponse, error), cause error) (modRev, createRev int64, err error) {
	if s.opts.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, began.Add(s.opts.RequestTimeout))
		defer cancel()
		if ctx.Err() != nil {
			return 0, 0, cause
		}
	}
	for range settleAttempts {
		resp, err := s.get(ctx, k)
		if err != nil {
			return 0, 0, cause
		}
		var cur *mvccpb.KeyValue
		if len(resp.Kvs) > 0 {
			cur = resp.Kvs[0]
		}
		unchanged := (create && cur == nil) || (!create && cur != nil && cur.ModRevision == expected)
		if !unchanged {
			after := expected
			if create {
				if cur == nil {
					return 0, 0, cause // created and deleted since: whose create is unknown
				}
				after = cur.CreateRevision - 1
			}
			ev, err := s.firstChangeAfter(ctx, k, after)
			switch {
			case err != nil:
				return 0, 0, cause
			case ev.Type == mvccpb.PUT && bytes.Equal(ev.Kv.Value, value) && (!create || ev.Kv.CreateRevision == ev.Kv.ModRevision):
				s.log.Info("A write whose answer was lost was applied", "key", k, "revision", ev.Kv.ModRevision, "cause", cause)
				return ev.Kv.ModRevision, ev.Kv.CreateRevision, nil
			case create:
				return 0, 0, storage.ErrKeyExists
			case cur == nil:
				return 0, 0, storage.ErrNotFound
			default:
				return 0, 0, storage.ErrConflict
			}
		}
		tr, err := send(ctx)
		switch {
		case err == nil && tr.Succeeded:
			s.log.Info("A write whose answer was lost was not applied; sent again, it was", "key", k, "revision", tr.Header.Revision, "cause", cause)
			created := tr.Header.Revision
			if !create && cur != nil {
				created = cur.CreateRevision
			}
			return tr.Header.Revision, created, nil
		case err != nil && !settleable(ctx, err):
			return 0, 0, cause
		}
		// Failed its compare (the first send applied meanwhile) or unknown
		// again: the next round reads what became of the key.
	}
	return 0, 0, cause
}

// firstChangeAfter is the first event on key k after revision rev, which
// the caller knows exists (k changed since rev): a watch from rev+1
// replays it from etcd's history. It runs through do, as reads do: on a
// replica, on the pool's healthy endpoint (the client's own balancer may
// put the watch on the member that was cut off, where it would wait out
// the request).
func (s *Store) firstChangeAfter(ctx context.Context, k string, rev int64) (*clientv3.Event, error) {
	var first *clientv3.Event
	err := s.do(ctx, false, func(ctx context.Context, c *clientv3.Client) (uint64, error) {
		wctx, cancel := context.WithCancel(watchCtx(ctx))
		defer cancel()
		for resp := range c.Watch(wctx, k, clientv3.WithRev(rev+1)) {
			switch {
			case resp.CompactRevision != 0:
				// etcd's own error, so that the pool takes it for an answer.
				return 0, fmt.Errorf("etcd: history of %s compacted at %d: %w", k, resp.CompactRevision, rpctypes.ErrCompacted)
			case resp.Err() != nil:
				return 0, resp.Err()
			case len(resp.Events) > 0:
				first = resp.Events[0]
				return resp.Header.RaftTerm, nil
			}
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return 0, errors.New("etcd: the watch ended before its first event")
	})
	if err != nil {
		return nil, err
	}
	return first, nil
}
