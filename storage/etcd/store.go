package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasehold/leasehold/storage"
)

// Store is a storage.Interface on an etcd cluster. Create it with Open.
type Store struct {
	opts   Options
	client *clientv3.Client
	log    *slog.Logger
	prefix string
	// metaKey is a reserved key that is never written; reads of it carry
	// the store's revision in their header at the cost of an empty range.
	metaKey string

	compactRev atomic.Int64 // last known etcd compact revision (a lower bound)

	// large paces the writes of large values (Options.LargeWriteBytesPerSec);
	// nil when they are not limited.
	large *pacer

	// pool sends reads and writes to a healthy endpoint (failover.go);
	// nil when there is one endpoint or no RequestTimeout.
	pool *pool
	// terms ends writes sent under a replaced raft leader
	// (leaderchange.go); nil without Options.LeaderChanged.
	terms *leaderTerms

	closed atomic.Bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

var (
	_ storage.Interface     = (*Store)(nil)
	_ storage.StatsReporter = (*Store)(nil)
	_ storage.Elector       = (*Store)(nil)
	_ storage.StaleReader   = (*Store)(nil)
)

// Open connects to etcd and checks that it answers within
// Options.DialTimeout.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	cfg := clientv3.Config{
		Endpoints:        opts.Endpoints,
		DialTimeout:      opts.DialTimeout,
		TLS:              opts.TLS,
		Logger:           newZapLogger(opts.Logger),
		AutoSyncInterval: opts.AutoSyncInterval,
		// Keepalives detect a dead member behind a half-open connection,
		// so that requests and watches move to a live one.
		DialKeepAliveTime:    5 * opts.DialTimeout,
		DialKeepAliveTimeout: opts.DialTimeout,
		// Above MaxValueBytes, so that an oversized request reaches etcd
		// and fails with its own limit (ErrValueTooLarge).
		MaxCallSendMsgSize: opts.MaxValueBytes + 1<<20,
	}
	if opts.RequestTimeout > 0 {
		// A member without a leader answers "no leader" at once, but the
		// client retries that (it is Unavailable) until the deadline: a
		// cut-off member would then take the whole RequestTimeout to fail
		// every read, and a client-go elector on its device would stop
		// leading (after its release attempt) as late as others may take
		// the lease. One attempt each: the caller retries.
		cfg.MaxUnaryRetries = 1
	}
	client := opts.Client
	if client == nil {
		if client, err = clientv3.New(cfg); err != nil {
			return nil, fmt.Errorf("etcd: connect to %v: %w", opts.Endpoints, err)
		}
	}
	s := &Store{
		opts:    opts,
		client:  client,
		log:     opts.Logger,
		prefix:  opts.Prefix,
		metaKey: opts.Prefix + reservedDir + "revision",
		done:    make(chan struct{}),
	}
	if opts.LargeWriteBytesPerSec > 0 {
		// The burst holds the largest value, so that every write can pass.
		s.large = newPacer(opts.LargeWriteBytesPerSec, int(max(opts.LargeWriteBytesPerSec, int64(opts.MaxValueBytes))))
	}
	if opts.Client == nil && opts.RequestTimeout > 0 && (len(opts.Endpoints) > 1 || opts.AutoSyncInterval > 0) {
		if s.pool, err = newPool(s, opts.Endpoints); err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("etcd: %w", err)
		}
		s.wg.Go(s.pool.probeLoop)
	}
	if opts.LeaderChanged != nil && s.pool == nil {
		s.terms = &leaderTerms{}
		s.wg.Go(func() { s.terms.watch(opts.LeaderChanged, s.done) })
	}
	cctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	rev, err := s.CurrentRevision(cctx)
	cancel()
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("etcd: no answer from %v within %s: %w", opts.Endpoints, opts.DialTimeout, err)
	}
	if opts.CompactInterval > 0 {
		s.wg.Go(s.compactor)
	}
	s.log.InfoContext(ctx, "storage opened", "backend", "etcd", "endpoints", strings.Join(opts.Endpoints, ","), "prefix", opts.Prefix, "revision", rev)
	return s, nil
}

// reservedDir holds the backend's own keys, below Options.Prefix.
const reservedDir = "/_leasehold/"

// ReservedDir is reservedDir for tools that read a snapshot of the store:
// its keys are no records of the engine's.
const ReservedDir = reservedDir

// Close stops background work, resigns held leaderships, ends open watches
// with ErrClosed and closes the client. It is safe to call twice.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.done)
	s.wg.Wait()
	if s.pool != nil {
		s.pool.close()
	}
	if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcd: close: %w", err)
	}
	return nil
}

// Client is the underlying etcd client, for operators' tooling and tests.
func (s *Store) Client() *clientv3.Client { return s.client }

func (s *Store) key(k string) string { return s.prefix + k }

func (s *Store) fromKV(kv *clientv3.GetResponse, i int) storage.KeyValue {
	src := kv.Kvs[i]
	return storage.KeyValue{
		Key:            strings.TrimPrefix(string(src.Key), s.prefix),
		Value:          src.Value,
		CreateRevision: src.CreateRevision,
		ModRevision:    src.ModRevision,
	}
}

// wrapErr maps etcd's errors onto the storage sentinels.
func (s *Store) wrapErr(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("etcd: %s: %w", op, storage.ErrClosed)
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("etcd: %s: %w", op, storage.ErrCompacted)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("etcd: %s: %w", op, storage.ErrFutureRevision)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("etcd: %s: %w", op, storage.ErrValueTooLarge)
	case errors.Is(err, rpctypes.ErrNoSpace):
		return fmt.Errorf("etcd: %s: %w", op, storage.ErrQuotaExceeded)
	case timedOut(err):
		return fmt.Errorf("etcd: %s: %w: %w", op, storage.ErrTimeout, err)
	}
	return fmt.Errorf("etcd: %s: %w", op, err)
}

// timedOut reports whether err leaves a request's outcome unknown: it
// ran out of time (the caller's, Options.RequestTimeout, or etcd's own),
// or a write was sent and not answered.
func timedOut(err error) bool {
	for _, e := range []error{context.DeadlineExceeded, errOutcomeUnknown, rpctypes.ErrTimeout,
		rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// opCtx bounds one request by Options.RequestTimeout, requiring a leader
// (see there); without it, ctx is used as it is.
func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.opts.RequestTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), s.opts.RequestTimeout)
}

// do runs one read or write, op, bounded as opCtx says: through the pool
// when there is one (a healthy endpoint, another one when that is safe),
// else once on the client. op returns the raft term of its answer's
// header (0 without an answer).
func (s *Store) do(ctx context.Context, write bool, op func(ctx context.Context, c *clientv3.Client) (uint64, error)) error {
	if s.pool != nil {
		return s.pool.do(ctx, write, op)
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	began := time.Now()
	if write {
		for {
			wctx, stop := s.endOnLeaderChange(ctx)
			_, err := op(wctx, s.client)
			err = leaderChangedErr(wctx, err)
			stop()
			if !proposalDropped(err) && !briefNoLeader(err, began) {
				return err
			}
			// The member's raft dropped the proposal (a leadership
			// hand-over under way, or no leader known yet): it was never
			// in the log, so sending it again is safe, and the next
			// leader takes it.
			select {
			case <-ctx.Done():
				return err
			case <-time.After(readRetryPause):
			}
		}
	}
	for {
		_, err := op(ctx, s.client)
		if !errors.Is(err, rpctypes.ErrLeaderChanged) && !errors.Is(err, rpctypes.ErrGRPCLeaderChanged) && !briefNoLeader(err, began) {
			return err
		}
		// A linearizable read whose ReadIndex the old leader never
		// answered: it read nothing, and the new leader answers it. The
		// network client retries it (etcd's retry interceptor, for
		// kube-apiserver too); the in-process client does not, and the
		// caller would answer 500 "leader changed".
		select {
		case <-ctx.Done():
			return err
		case <-time.After(readRetryPause):
		}
	}
}

// noLeaderGrace is how long a request answered "no leader" is tried
// again before that answer stands. The member answers it at once when it
// knows no leader, before the request runs (so sending it again is safe),
// and a leadership move (the members' own, off the election controller's
// member) leaves it without one for milliseconds: without the grace such a
// write answered 500. It is short beside an election timeout (700 ms), so
// that a member cut off from its quorum still fails fast.
const noLeaderGrace = 500 * time.Millisecond

// briefNoLeader reports a "no leader" answer within noLeaderGrace of a
// request's start.
func briefNoLeader(err error, began time.Time) bool {
	if err == nil || time.Since(began) > noLeaderGrace {
		return false
	}
	return errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrGRPCNoLeader) || rpctypes.ErrorDesc(err) == rpctypes.ErrNoLeader.Error()
}

// proposalDropped reports etcd's "raft proposal dropped": the member's
// raft refused the write before it reached the log.
func proposalDropped(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unknown && strings.Contains(st.Message(), "raft proposal dropped")
}

// readRetryPause is the pause before a read that a leader change ended is
// sent again (etcd's client waits 25 ms, with jitter).
const readRetryPause = 25 * time.Millisecond

// get is a read through do.
func (s *Store) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	var resp *clientv3.GetResponse
	err := s.do(ctx, false, func(ctx context.Context, c *clientv3.Client) (uint64, error) {
		var err error
		if resp, err = c.Get(ctx, key, opts...); err != nil {
			return 0, err
		}
		return resp.Header.RaftTerm, nil
	})
	return resp, err
}

// txn is a write transaction through do.
func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := s.do(ctx, true, func(ctx context.Context, c *clientv3.Client) (uint64, error) {
		var err error
		if resp, err = c.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit(); err != nil {
			return 0, err
		}
		return resp.Header.RaftTerm, nil
	})
	return resp, err
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	return nil
}

// Get reads key linearizably (a quorum read), so a replica never answers
// with data older than a write another replica acknowledged.
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	if err := s.checkOpen(); err != nil {
		return storage.KeyValue{}, err
	}
	resp, err := s.get(ctx, s.key(key))
	if err != nil {
		return storage.KeyValue{}, s.wrapErr("get "+key, err)
	}
	if len(resp.Kvs) == 0 {
		return storage.KeyValue{}, fmt.Errorf("etcd: get %s: %w", key, storage.ErrNotFound)
	}
	return s.fromKV(resp, 0), nil
}

// GetStale reads key serializably: from the applied state of the member
// the request goes to, without the quorum round of Get (etcd's ReadIndex,
// through the raft leader). It may lag writes acknowledged elsewhere
// (storage.StaleReader says where that is safe).
func (s *Store) GetStale(ctx context.Context, key string) (storage.KeyValue, error) {
	if err := s.checkOpen(); err != nil {
		return storage.KeyValue{}, err
	}
	resp, err := s.get(ctx, s.key(key), clientv3.WithSerializable())
	if err != nil {
		return storage.KeyValue{}, s.wrapErr("get "+key, err)
	}
	if len(resp.Kvs) == 0 {
		return storage.KeyValue{}, fmt.Errorf("etcd: get %s: %w", key, storage.ErrNotFound)
	}
	return s.fromKV(resp, 0), nil
}

// Create puts key only if it does not exist (create revision 0).
func (s *Store) Create(ctx context.Context, key string, value []byte) (storage.KeyValue, error) {
	if err := s.checkWrite(ctx, value); err != nil {
		return storage.KeyValue{}, fmt.Errorf("etcd: create %s: %w", key, err)
	}
	k := s.key(key)
	send := func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(k, string(value))}, nil)
	}
	began := time.Now()
	resp, err := send(ctx)
	if settleable(ctx, err) { // settle.go
		rev, _, serr := s.settleCAS(ctx, began, k, value, 0, true, send, err)
		if serr == nil {
			return storage.KeyValue{Key: key, Value: clone(value), CreateRevision: rev, ModRevision: rev}, nil
		}
		if serr != err {
			return storage.KeyValue{}, fmt.Errorf("etcd: create %s: %w", key, serr)
		}
	}
	if err != nil {
		return storage.KeyValue{}, s.wrapErr("create "+key, err)
	}
	if !resp.Succeeded {
		return storage.KeyValue{}, fmt.Errorf("etcd: create %s: %w", key, storage.ErrKeyExists)
	}
	rev := resp.Header.Revision
	return storage.KeyValue{Key: key, Value: clone(value), CreateRevision: rev, ModRevision: rev}, nil
}

// Update puts key only if its mod revision is expectedModRevision; on a
// mismatch the else branch reads the key to tell conflict from absence in
// the same round trip.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedModRevision int64) (storage.KeyValue, error) {
	if err := s.checkWrite(ctx, value); err != nil {
		return storage.KeyValue{}, fmt.Errorf("etcd: update %s: %w", key, err)
	}
	k := s.key(key)
	// etcd compares a missing key as revision 0: requiring a positive
	// create revision keeps Update from creating keys.
	send := func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", expectedModRevision),
			clientv3.Compare(clientv3.CreateRevision(k), ">", 0)},
			[]clientv3.Op{clientv3.OpPut(k, string(value), clientv3.WithPrevKV())},
			[]clientv3.Op{clientv3.OpGet(k, clientv3.WithKeysOnly())})
	}
	began := time.Now()
	resp, err := send(ctx)
	if settleable(ctx, err) { // settle.go
		mod, created, serr := s.settleCAS(ctx, began, k, value, expectedModRevision, false, send, err)
		if serr == nil {
			return storage.KeyValue{Key: key, Value: clone(value), CreateRevision: created, ModRevision: mod}, nil
		}
		if serr != err {
			return storage.KeyValue{}, fmt.Errorf("etcd: update %s: %w", key, serr)
		}
	}
	if err != nil {
		return storage.KeyValue{}, s.wrapErr("update "+key, err)
	}
	if !resp.Succeeded {
		return storage.KeyValue{}, s.casFailure("update", key, resp)
	}
	rev := resp.Header.Revision
	created := rev // unreachable fallback: the compare proved the key exists
	if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); prev != nil {
		created = prev.CreateRevision
	}
	return storage.KeyValue{Key: key, Value: clone(value), CreateRevision: created, ModRevision: rev}, nil
}

// Delete removes key, if expectedModRevision is 0 or its mod revision.
func (s *Store) Delete(ctx context.Context, key string, expectedModRevision int64) (storage.KeyValue, int64, error) {
	if err := s.checkOpen(); err != nil {
		return storage.KeyValue{}, 0, err
	}
	k := s.key(key)
	var cmps []clientv3.Cmp
	if expectedModRevision != 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", expectedModRevision))
	}
	resp, err := s.txn(ctx, cmps, []clientv3.Op{clientv3.OpDelete(k, clientv3.WithPrevKV())},
		[]clientv3.Op{clientv3.OpGet(k, clientv3.WithKeysOnly())})
	if err != nil {
		return storage.KeyValue{}, 0, s.wrapErr("delete "+key, err)
	}
	if !resp.Succeeded {
		return storage.KeyValue{}, 0, s.casFailure("delete", key, resp)
	}
	del := resp.Responses[0].GetResponseDeleteRange()
	if del.Deleted == 0 || len(del.PrevKvs) == 0 {
		return storage.KeyValue{}, 0, fmt.Errorf("etcd: delete %s: %w", key, storage.ErrNotFound)
	}
	p := del.PrevKvs[0]
	prev := storage.KeyValue{Key: key, Value: p.Value, CreateRevision: p.CreateRevision, ModRevision: p.ModRevision}
	return prev, resp.Header.Revision, nil
}

// casFailure reads the else branch of a failed compare-and-swap.
func (s *Store) casFailure(op, key string, resp *clientv3.TxnResponse) error {
	if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
		return fmt.Errorf("etcd: %s %s: %w", op, key, storage.ErrConflict)
	}
	return fmt.Errorf("etcd: %s %s: %w", op, key, storage.ErrNotFound)
}

// checkWrite refuses a value over MaxValueBytes and paces a large one
// (Options.LargeWriteBytesPerSec).
func (s *Store) checkWrite(ctx context.Context, value []byte) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if len(value) > s.opts.MaxValueBytes {
		return fmt.Errorf("%d bytes (limit %d): %w", len(value), s.opts.MaxValueBytes, storage.ErrValueTooLarge)
	}
	if s.large != nil && len(value) > s.opts.LargeValueBytes {
		if err := s.large.wait(ctx, len(value)); err != nil {
			return fmt.Errorf("a value of %d bytes waits for its turn (values over %d bytes are limited to %d bytes/s in all), not sent: %w: %w",
				len(value), s.opts.LargeValueBytes, s.opts.LargeWriteBytesPerSec, storage.ErrTimeout, err)
		}
	}
	return nil
}

// CurrentRevision is etcd's revision, read linearizably: it covers every
// write acknowledged by any replica sharing the cluster.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	resp, err := s.get(ctx, s.metaKey, clientv3.WithCountOnly())
	if err != nil {
		return 0, s.wrapErr("current revision", err)
	}
	return resp.Header.Revision, nil
}

// Stats counts the keys under the prefix (the backend's own excluded) and
// reports the database size of the first endpoint that answers.
func (s *Store) Stats(ctx context.Context) (storage.Stats, error) {
	st := storage.Stats{Backend: "etcd"}
	if err := s.checkOpen(); err != nil {
		return st, err
	}
	all, err := s.get(ctx, s.prefix, clientv3.WithRange(storage.PrefixEnd(s.prefix)), clientv3.WithCountOnly())
	if err != nil {
		return st, s.wrapErr("stats", err)
	}
	own, err := s.get(ctx, s.prefix+reservedDir, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(all.Header.Revision))
	if err != nil {
		return st, s.wrapErr("stats", err)
	}
	st.Revision, st.Keys = all.Header.Revision, all.Count-own.Count
	if st.CompactRevision, err = s.CompactRevision(ctx); err != nil {
		return st, err
	}
	eps := s.client.Endpoints()
	if len(eps) == 0 {
		eps = []string{""} // an in-process client (Options.Client) has no endpoints: its Status is its server's
	}
	if s.pool != nil {
		eps = s.pool.healthyFirst()
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	for _, ep := range eps {
		if status, err := s.client.Status(ctx, ep); err == nil {
			st.SizeBytes = status.DbSize
			break
		}
	}
	return st, nil
}

// clone copies the caller's buffer, which it may reuse after the call.
func clone(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return append([]byte(nil), b...)
}
