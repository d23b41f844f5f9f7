package cluster

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The member's own store talks to its etcd server in process: the same
// KV, lease and watch servers that the client port's gRPC serves, called
// as functions (etcd's v3client adapters), without loopback TLS, HTTP/2
// framing or protobuf encoding. A profile of a member taking renewals had
// a third of its CPU there (socket writes, TLS, framing, protobuf).
//
// What the network path adds in front of those servers, and what of it
// this client keeps:
//   - etcd's interceptors: a request marked WithRequireLeader fails with
//     "no leader" at once when the member knows no leader, and a stream so
//     marked (watches, lease keepalives) ends with it once the member has
//     had no leader for three election timeouts; a learner serves only
//     serializable reads. Kept (leaderGuard): a member cut off from its
//     quorum fails its clients fast, as before.
//   - leasehold's gate (gate.go): it admits the member's own certificate
//     without any further check (a member may call everything), so there
//     is nothing for it to check here. The gate stays on the client port
//     for every remote client: replicas and operators' tools still go
//     through TLS and the gate, and nothing of this client is reachable
//     from outside the process.
//   - etcd's request size limit is the server's own (MaxRequestBytes,
//     checked when a proposal is made) and applies here too.
//
// Reads are as linearizable as on the network path: a Range without
// Serializable waits for the server's ReadIndex either way.

// StoreClient is a new in-process client of the member's etcd server, for
// its store (storage/etcd Options.Client); the caller closes it.
func (m *Member) StoreClient() *clientv3.Client {
	return newInProcessClient(m.etcd.Server)
}

// newInProcessClient is v3client.New with etcd's leader and learner checks
// (leaderGuard) in front of the KV, lease and watch servers.
func newInProcessClient(s *etcdserver.EtcdServer) *clientv3.Client {
	c := clientv3.NewCtxClient(context.Background(), clientv3.WithZapLogger(s.Logger()))
	g := &leaderGuard{s: s, streams: map[*streamGuard]struct{}{}}
	go g.monitor(c.Ctx())

	c.KV = clientv3.NewKVFromKVClient(&guardedKV{KVClient: adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(s)), g: g}, c)
	c.Lease = clientv3.NewLeaseFromLeaseClient(&guardedLease{LeaseClient: adapter.LeaseServerToLeaseClient(v3rpc.NewQuotaLeaseServer(s)), g: g}, c, time.Second)
	c.Watcher = &blankWatcher{clientv3.NewWatchFromWatchClient(&guardedWatch{WatchClient: adapter.WatchServerToWatchClient(v3rpc.NewWatchServer(s)), g: g}, c)}
	// Not for Defragment: without a health notifier etcd 3.6's maintenance
	// server dereferences nil there (space.go calls the server's own).
	c.Maintenance = clientv3.NewMaintenanceFromMaintenanceClient(adapter.MaintenanceServerToMaintenanceClient(v3rpc.NewMaintenanceServer(s, nil)), c)
	c.Cluster = clientv3.NewClusterFromClusterClient(adapter.ClusterServerToClusterClient(v3rpc.NewClusterServer(s)), c)
	c.Auth = clientv3.NewAuthFromAuthClient(adapter.AuthServerToAuthClient(v3rpc.NewAuthServer(s)), c)
	return c
}

// maxNoLeaderTicks is etcd's maxNoLeaderCnt: streams that require a leader
// end after this many election timeouts without one.
const maxNoLeaderTicks = 3

// leaderGuard does for the in-process client what etcd's gRPC
// interceptors do for the network's (newUnaryInterceptor,
// newStreamInterceptor and monitorLeader in etcd's v3rpc).
type leaderGuard struct {
	s *etcdserver.EtcdServer

	mu      sync.Mutex
	streams map[*streamGuard]struct{} // open streams that require a leader
}

// requiresLeader reports whether ctx was marked clientv3.WithRequireLeader.
func requiresLeader(ctx context.Context) bool {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		return false
	}
	ks := md[rpctypes.MetadataRequireLeaderKey]
	return len(ks) > 0 && ks[0] == rpctypes.MetadataHasLeader
}

// learner reports whether the member is a learner, which serves only
// serializable reads.
func (g *leaderGuard) learner() bool {
	return g.s.IsMemberExist(g.s.MemberID()) && g.s.IsLearner()
}

// unary checks one request before it reaches the server.
func (g *leaderGuard) unary(ctx context.Context, req any) error {
	if g.learner() {
		if r, ok := req.(*pb.RangeRequest); !ok || !r.Serializable {
			return rpctypes.ErrGRPCNotSupportedForLearner
		}
	}
	if requiresLeader(ctx) && g.s.Leader() == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	return nil
}

// stream opens a stream through open: a stream that requires a leader is
// ended with "no leader" when the member has none at its start or loses
// it for maxNoLeaderTicks election timeouts (monitor). The error then
// comes from the stream's Recv, as it does from a gRPC stream.
func (g *leaderGuard) stream(ctx context.Context, open func(ctx context.Context) error) (*streamGuard, error) {
	sg := &streamGuard{}
	if g.learner() {
		return nil, rpctypes.ErrGRPCNotSupportedForLearner
	}
	if !requiresLeader(ctx) {
		return sg, open(ctx)
	}
	sctx, cancel := context.WithCancel(ctx)
	sg.cancel = cancel
	if err := open(sctx); err != nil {
		cancel()
		return nil, err
	}
	if g.s.Leader() == 0 {
		sg.end()
		return sg, nil
	}
	g.mu.Lock()
	g.streams[sg] = struct{}{}
	g.mu.Unlock()
	context.AfterFunc(sctx, func() {
		g.mu.Lock()
		delete(g.streams, sg)
		g.mu.Unlock()
	})
	return sg, nil
}

// monitor ends the streams that require a leader once the member has had
// none for maxNoLeaderTicks election timeouts, until ctx (the client's)
// ends or the server stops.
func (g *leaderGuard) monitor(ctx context.Context) {
	election := time.Duration(g.s.Cfg.TickMs) * time.Duration(g.s.Cfg.ElectionTicks) * time.Millisecond
	t := time.NewTicker(election)
	defer t.Stop()
	noLeader := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.s.StoppingNotify():
			return
		case <-t.C:
		}
		if g.s.Leader() != 0 {
			noLeader = 0
			continue
		}
		if noLeader++; noLeader < maxNoLeaderTicks {
			continue
		}
		g.mu.Lock()
		ended := make([]*streamGuard, 0, len(g.streams))
		for sg := range g.streams {
			ended = append(ended, sg)
		}
		g.streams = map[*streamGuard]struct{}{}
		g.mu.Unlock()
		for _, sg := range ended {
			sg.end()
		}
	}
}

// streamGuard is one guarded stream: ended marks it ended for want of a
// leader, and its Recv then fails with "no leader".
type streamGuard struct {
	mu     sync.Mutex
	ended  bool
	cancel context.CancelFunc
}

func (sg *streamGuard) end() {
	sg.mu.Lock()
	sg.ended = true
	sg.mu.Unlock()
	sg.cancel()
}

// recvErr is the error a stream's Recv reports in place of err.
func (sg *streamGuard) recvErr(err error) error {
	if err == nil {
		return nil
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.ended {
		return rpctypes.ErrGRPCNoLeader
	}
	return err
}

type guardedKV struct {
	pb.KVClient
	g *leaderGuard
}

func (k *guardedKV) Range(ctx context.Context, in *pb.RangeRequest, opts ...grpc.CallOption) (*pb.RangeResponse, error) {
	if err := k.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return k.KVClient.Range(ctx, in, opts...)
}

func (k *guardedKV) Put(ctx context.Context, in *pb.PutRequest, opts ...grpc.CallOption) (*pb.PutResponse, error) {
	if err := k.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return k.KVClient.Put(ctx, in, opts...)
}

func (k *guardedKV) DeleteRange(ctx context.Context, in *pb.DeleteRangeRequest, opts ...grpc.CallOption) (*pb.DeleteRangeResponse, error) {
	if err := k.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return k.KVClient.DeleteRange(ctx, in, opts...)
}

func (k *guardedKV) Txn(ctx context.Context, in *pb.TxnRequest, opts ...grpc.CallOption) (*pb.TxnResponse, error) {
	if err := k.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return k.KVClient.Txn(ctx, in, opts...)
}

func (k *guardedKV) Compact(ctx context.Context, in *pb.CompactionRequest, opts ...grpc.CallOption) (*pb.CompactionResponse, error) {
	if err := k.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return k.KVClient.Compact(ctx, in, opts...)
}

type guardedLease struct {
	pb.LeaseClient
	g *leaderGuard
}

func (l *guardedLease) LeaseGrant(ctx context.Context, in *pb.LeaseGrantRequest, opts ...grpc.CallOption) (*pb.LeaseGrantResponse, error) {
	if err := l.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return l.LeaseClient.LeaseGrant(ctx, in, opts...)
}

func (l *guardedLease) LeaseRevoke(ctx context.Context, in *pb.LeaseRevokeRequest, opts ...grpc.CallOption) (*pb.LeaseRevokeResponse, error) {
	if err := l.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return l.LeaseClient.LeaseRevoke(ctx, in, opts...)
}

func (l *guardedLease) LeaseTimeToLive(ctx context.Context, in *pb.LeaseTimeToLiveRequest, opts ...grpc.CallOption) (*pb.LeaseTimeToLiveResponse, error) {
	if err := l.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return l.LeaseClient.LeaseTimeToLive(ctx, in, opts...)
}

func (l *guardedLease) LeaseLeases(ctx context.Context, in *pb.LeaseLeasesRequest, opts ...grpc.CallOption) (*pb.LeaseLeasesResponse, error) {
	if err := l.g.unary(ctx, in); err != nil {
		return nil, err
	}
	return l.LeaseClient.LeaseLeases(ctx, in, opts...)
}

func (l *guardedLease) LeaseKeepAlive(ctx context.Context, opts ...grpc.CallOption) (pb.Lease_LeaseKeepAliveClient, error) {
	var inner pb.Lease_LeaseKeepAliveClient
	sg, err := l.g.stream(ctx, func(ctx context.Context) error {
		var err error
		inner, err = l.LeaseClient.LeaseKeepAlive(ctx, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardedKeepAlive{Lease_LeaseKeepAliveClient: inner, sg: sg}, nil
}

type guardedKeepAlive struct {
	pb.Lease_LeaseKeepAliveClient
	sg *streamGuard
}

func (s *guardedKeepAlive) Recv() (*pb.LeaseKeepAliveResponse, error) {
	resp, err := s.Lease_LeaseKeepAliveClient.Recv()
	return resp, s.sg.recvErr(err)
}

type guardedWatch struct {
	pb.WatchClient
	g *leaderGuard
}

func (w *guardedWatch) Watch(ctx context.Context, opts ...grpc.CallOption) (pb.Watch_WatchClient, error) {
	var inner pb.Watch_WatchClient
	sg, err := w.g.stream(ctx, func(ctx context.Context) error {
		var err error
		inner, err = w.WatchClient.Watch(ctx, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardedWatchStream{Watch_WatchClient: inner, sg: sg}, nil
}

type guardedWatchStream struct {
	pb.Watch_WatchClient
	sg *streamGuard
}

func (s *guardedWatchStream) Recv() (*pb.WatchResponse, error) {
	resp, err := s.Watch_WatchClient.Recv()
	return resp, s.sg.recvErr(err)
}

// blankWatcher hides the caller's context values from the watch server,
// as v3client does: its tracing reads them unsynchronised (data races).
type blankWatcher struct{ clientv3.Watcher }

type blankContext struct{ context.Context }

func (*blankContext) String() string { return "(blankCtx)" }

func (w *blankWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	return w.Watcher.Watch(&blankContext{ctx}, key, opts...)
}
