package backend

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster"
	"github.com/leasehold/leasehold/storage/etcd"
	"github.com/leasehold/leasehold/storage/snapshots"
)

// Store is what serve needs of a storage backend. The optional
// capabilities (storage.Backuper, storage.MemoryReleaser) are asserted by
// the caller.
type Store interface {
	storage.Interface
	storage.StatsReporter
	storage.Elector
}

// Config is serve's storage configuration: its flags as given. Resolve
// decides from them and the data directory which storage runs (Mode).
type Config struct {
	// Backend is --storage: "bbolt" (one file in the data directory) or
	// "etcd". A member or a replica runs on etcd whatever it says.
	Backend      string
	WatchHistory time.Duration
	// WatchHistoryMaxBytes bounds the memory of the bbolt backend's history.
	WatchHistoryMaxBytes int64
	// QuotaBytes caps the bbolt backend's keys and values, all held in
	// memory (boltdb.Options.QuotaBytes).
	QuotaBytes int64
	// CommitDelay is the bbolt backend's group commit window
	// (boltdb.Options.CommitDelay).
	CommitDelay     time.Duration
	EtcdEndpoints   string // comma-separated client URLs
	EtcdPrefix      string
	EtcdCAFile      string
	EtcdCertFile    string
	EtcdKeyFile     string
	EtcdDialTimeout time.Duration
	// AcceptMetaFallback opens a bbolt file whose newer meta page is
	// damaged on the older one (boltdb.Options.AcceptMetaFallback).
	AcceptMetaFallback bool
	// Cluster holds the flags of an embedded etcd member or a replica.
	Cluster cluster.Flags
	// Snapshots is the snapshot schedule (NewSnapshots).
	Snapshots snapshots.Flags
}

// RegisterFlags adds the storage flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.WatchHistory, "watch-history", 5*time.Minute, "how long recent changes are kept for resuming watches and paginated lists (older resourceVersions get 410 Expired)")
	fs.Int64Var(&c.WatchHistoryMaxBytes, "watch-history-max-bytes", boltdb.DefaultHistoryMaxBytes, "most memory, in `bytes`, the recent changes of --watch-history may hold (bbolt storage): under heavy write load this bound, not the duration, decides how far back watches can resume")
	fs.Int64Var(&c.QuotaBytes, "storage-quota-bytes", boltdb.DefaultQuotaBytes, "most `bytes` of keys and values the bbolt storage holds (all kept in memory): writes that would grow the data beyond it fail (as etcd's \"database space exceeded\"), and values over 64 KiB may hold a quarter of it; writes that do not grow the data, such as renewals, always pass; on a cluster member, etcd's database quota is four times it")
	fs.DurationVar(&c.CommitDelay, "storage-commit-delay", 0, "how long the bbolt storage waits after a write for more writes to commit and sync with it (0: commit at once): each commit writes at least 16 KiB to the disk, so on an SD card or eMMC a delay such as 100ms divides the bytes written per renewal, and adds up to that much to the latency of every write; writes are still answered only once synced")
	fs.StringVar(&c.Backend, "storage", "bbolt", "storage `backend`: bbolt (one file in the data directory) or etcd (an etcd cluster that several replicas share)")
	fs.StringVar(&c.EtcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client `URLs` (with --storage etcd), e.g. https://etcd-0:2379,https://etcd-1:2379")
	fs.StringVar(&c.EtcdPrefix, "etcd-prefix", "/leasehold", "etcd key `prefix`, so that several installations can share one etcd cluster")
	fs.StringVar(&c.EtcdCAFile, "etcd-cafile", "", "PEM `file` with the CA certificates that verify the etcd servers (default: system roots, when the endpoints use https)")
	fs.StringVar(&c.EtcdCertFile, "etcd-certfile", "", "PEM client certificate `file` for etcd (with --etcd-keyfile)")
	fs.StringVar(&c.EtcdKeyFile, "etcd-keyfile", "", "PEM client key `file` for etcd (with --etcd-certfile)")
	fs.DurationVar(&c.EtcdDialTimeout, "etcd-dial-timeout", 5*time.Second, "how long to wait for etcd at startup before giving up")
	fs.BoolVar(&c.Cluster.Init, "cluster-init", false, "start a new cluster of leasehold servers on an embedded etcd member, with this server as its first member (other devices then --join it); a restart with the same data directory rejoins")
	fs.StringVar(&c.Cluster.Join, "join", "", "join the cluster of the member serving the API at `URL` (https://device-1:6443; http only on loopback), with --cluster-token; a restart with the same data directory rejoins without it")
	fs.BoolVar(&c.Cluster.Replica, "replica", false, "with --join and --cluster-token: run no etcd member, only the API, on the members' etcd (what devices beyond five do); the join hands over a client certificate and the members' client URLs, kept in <data-dir>/replica, so a restart needs the data directory alone")
	fs.StringVar(&c.Cluster.Token, "cluster-token", "", "shared secret `token` that admits members to the cluster (prefer --cluster-token-file: command lines are visible to other users); it is never sent, only proven")
	fs.StringVar(&c.Cluster.TokenFile, "cluster-token-file", "", "`file` holding the cluster token")
	fs.StringVar(&c.Cluster.PeerListen, "peer-listen", "127.0.0.1:2380", "`host:port` of the embedded etcd member's peer listener (mutual TLS from the cluster CA)")
	fs.StringVar(&c.Cluster.ClientListen, "cluster-client-listen", "", "`host:port` of the embedded etcd member's client listener, which --storage etcd replicas may use with a client certificate of the cluster CA (default: the --peer-listen host, port one below)")
	fs.StringVar(&c.Cluster.Name, "member-name", "", "the embedded etcd member's `name`, unique in the cluster (default: host name and peer port)")
	fs.StringVar(&c.Cluster.AdvertiseHost, "advertise-host", "", "`address` the other members reach this one at (default: the --peer-listen host, or when that is 0.0.0.0 the local address towards --join, or the first non-loopback address)")
	fs.DurationVar(&c.Cluster.RequestTimeout, "cluster-request-timeout", 3*time.Second, "longest a storage request of a cluster member or replica may take: a member cut off from its quorum answers 5xx within it, a replica sends requests to the members that answer")
	fs.DurationVar(&c.Cluster.StaleLearnerAfter, "cluster-stale-learner-after", cluster.DefaultStaleLearnerAfter, "how long a learner may stay unreachable (a joiner that died before it started or was promoted) before the etcd leader's member removes it: etcd admits one learner at a time, so a stale one blocks every later join")
	fs.BoolVar(&c.Cluster.MoveSlowLeader, "cluster-move-slow-leader", true, "let a member that has found the etcd leader's commits slow (three probes in a row, 1.5 s), while another member answers it several times faster than the leader, move the leadership off it by standing for election (at most once a minute); off: it only reports it (log, leasehold_cluster_leader_slow, cluster status)")
	fs.Int64Var(&c.Cluster.LargeWriteBytesPerSec, "cluster-large-write-bytes-per-sec", DefaultLargeWriteBytesPerSec, "most `bytes` per second of values over 64 KiB that a cluster member or replica writes (a larger write waits its turn): every write of a cluster goes through one raft log and every member's WAL, and a storm of large writes would hold the renewals queued behind it (0: unlimited)")
	fs.DurationVar(&c.Cluster.CertValidity, "cluster-cert-validity", pki.DefaultCertValidity, "how long the certificates of cluster members and replicas last (those this member issues: its own, joiners', replicas' and their renewals); every member and replica renews its own at about two thirds of it (with jitter), without a restart; use the same value on every member")
	c.Snapshots.RegisterFlags(fs)
	fs.BoolVar(&c.AcceptMetaFallback, "accept-meta-fallback", false, "open a database whose newer meta page is damaged on the older one, which may lose the last committed write (default: refuse to start)")
}

// DefaultLargeWriteBytesPerSec is --cluster-large-write-bytes-per-sec's
// default: about one 200 KB patch a second per member or replica.
const DefaultLargeWriteBytesPerSec = 256 << 10

// ReplicaStore is the store of an API-only replica: the etcd backend on
// the members, and the renewal of its certificate, which Close stops.
type ReplicaStore struct {
	*etcd.Store
	stopRenewal context.CancelFunc
}

// Close stops the renewal, then closes the store.
func (s *ReplicaStore) Close() error {
	s.stopRenewal()
	return s.Store.Close()
}

// MemberStore is the store of an embedded etcd member: the etcd backend
// on the member's own etcd server, called in process, which closes the
// member with it.
type MemberStore struct {
	*etcd.Store
	member     *cluster.Member
	membership *cluster.Membership
}

// Member is the running etcd member.
func (s *MemberStore) Member() *cluster.Member { return s.member }

// Membership is the member's side of the membership endpoints (joins,
// status, removal), which web serves.
func (s *MemberStore) Membership() *cluster.Membership { return s.membership }

// Backup streams a snapshot of the member's etcd database (etcd's
// maintenance Snapshot, taken by this member): GET /leasehold/v1/backup and
// "leasehold backup" on a member.
func (s *MemberStore) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return s.member.Snapshot(ctx, w)
}

// BackupBarrier is the linearizable read through the raft leader that
// precedes the member's backup (cluster.Member.Barrier): a member cut off
// from its quorum refuses to back up, and the revision it returns is one
// the snapshot must reach.
func (s *MemberStore) BackupBarrier(ctx context.Context) (int64, error) {
	return s.member.Barrier(ctx)
}

// Close closes the store, then stops the member.
func (s *MemberStore) Close() error {
	err := s.Store.Close()
	s.member.Close()
	return err
}

// Options are what Open needs besides the configuration.
type Options struct {
	Config Config
	// Mode is Config.Resolve's answer.
	Mode Mode
	Dir  datadir.Layout
	// OnCommit, when set, observes bbolt's commits.
	OnCommit func(d time.Duration, writes int, err error)
	// Logger receives the backends' messages; ClusterLogger the member's
	// and the replica's (provisioning, joins), EtcdLogger the embedded
	// etcd server's (default Logger). On etcd, gRPC's own errors (under
	// the etcd client and server) go to GRPCLogger, which would otherwise
	// write them unlabelled to standard error.
	Logger, ClusterLogger, EtcdLogger, GRPCLogger *slog.Logger
	// ControllerElection names the storage election whose leader a
	// member's cluster status reports as the election controller.
	ControllerElection string
}

// Open opens the storage of o.Mode: it provisions (or joins) a cluster
// member or a replica first. The returned string names the backend in
// logs and the UI: the bbolt file, or the etcd endpoints and prefix.
func Open(ctx context.Context, o Options) (Store, string, error) {
	c := o.Config
	for _, l := range []**slog.Logger{&o.ClusterLogger, &o.EtcdLogger, &o.GRPCLogger} {
		if *l == nil {
			*l = o.Logger
		}
	}
	if o.Mode.Shared() {
		etcd.RouteGRPCLogs(o.GRPCLogger)
	}
	switch o.Mode {
	case Member:
		return openMember(ctx, o)
	case Replica:
		r, err := cluster.PrepareReplica(ctx, c.Cluster, o.Dir.Replica(), o.ClusterLogger)
		if err != nil {
			return nil, "", err
		}
		c.EtcdEndpoints = strings.Join(r.Endpoints, ",")
		c.EtcdPrefix = r.Prefix
		c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile = r.Files.CAFile, r.Files.CertFile, r.Files.KeyFile
		// The etcd client follows the members' list by itself.
		// Bounded requests that fail over between the members. A replica
		// does not compact: the members refuse it that (storage/cluster's
		// gate), and their own compactors keep --watch-history.
		c.WatchHistory = -1
		st, name, err := openEtcd(ctx, c, time.Minute, c.Cluster.RequestTimeout, c.Cluster.LargeWriteBytesPerSec, r.Name, o.Logger)
		if err != nil {
			return nil, "", err
		}
		// The replica renews its certificate while it runs (storage/cluster's
		// RenewReplica), until its store closes.
		rctx, stop := context.WithCancel(context.Background())
		go cluster.RenewReplica(rctx, r, o.ClusterLogger)
		return &ReplicaStore{Store: st.(*etcd.Store), stopRenewal: stop}, name, nil
	case ExternalEtcd:
		return openEtcd(ctx, c, 0, 0, 0, "", o.Logger)
	case SingleDevice:
		dbPath := o.Dir.Database()
		s, err := boltdb.Open(ctx, dbPath, boltdb.Options{HistoryWindow: c.WatchHistory, HistoryMaxBytes: c.WatchHistoryMaxBytes, QuotaBytes: c.QuotaBytes, Logger: o.Logger, OnCommit: o.OnCommit,
			CommitDelay: c.CommitDelay, AcceptMetaFallback: c.AcceptMetaFallback})
		if err != nil {
			return nil, "", fmt.Errorf("open database %s: %w", dbPath, err)
		}
		return s, dbPath, nil
	}
	return nil, "", fmt.Errorf("storage: unresolved mode %v", o.Mode)
}

// openEtcd opens the etcd backend of c; autoSync refreshes the endpoints
// from the member list (0: never), requestTimeout bounds each request and
// moves it to a member that answers (0: the client's own retries),
// largeWriteRate paces large values (0: unlimited), identity names this
// server in the election keys (default the host name).
func openEtcd(ctx context.Context, c Config, autoSync, requestTimeout time.Duration, largeWriteRate int64, identity string, log *slog.Logger) (Store, string, error) {
	tlsCfg, err := etcd.TLSConfig(c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile)
	if err != nil {
		return nil, "", err
	}
	s, err := etcd.Open(ctx, etcd.Options{
		Endpoints:   splitList(c.EtcdEndpoints),
		Prefix:      c.EtcdPrefix,
		TLS:         tlsCfg,
		DialTimeout: c.EtcdDialTimeout,
		// etcd keeps history until compacted: compact so that
		// --watch-history of it stays, as on bbolt.
		CompactInterval:       c.WatchHistory,
		Logger:                log,
		AutoSyncInterval:      autoSync,
		RequestTimeout:        requestTimeout,
		Identity:              identity,
		ElectionTTL:           clusterElectionTTL(requestTimeout),
		LargeWriteBytesPerSec: largeWriteRate,
	})
	if err != nil {
		return nil, "", err
	}
	return s, "etcd " + c.EtcdEndpoints + " " + c.EtcdPrefix, nil
}

// clusterElectionTTL is the lease behind the election controller of an
// embedded cluster's members and replicas (requestTimeout > 0; 0 keeps
// storage/etcd's default for --storage etcd): 2 s, so that a survivor
// runs the controller within 4 s (one coordinated lease) of its server's
// crash. The holder gives it up when no renewal was answered within two
// thirds of it (1.3 s; the members' quorum round trip on a loaded 2-core
// machine stays under 0.3 s), and etcd's shortest lease on the members'
// 700 ms election timeout is 1 s.
func clusterElectionTTL(requestTimeout time.Duration) time.Duration {
	if requestTimeout <= 0 {
		return 0
	}
	return 2 * time.Second
}

// openMember provisions the member, gives a new one its first data,
// starts it and opens the etcd backend on it.
func openMember(ctx context.Context, o Options) (Store, string, error) {
	c := o.Config
	p, err := cluster.Provision(ctx, c.Cluster, o.Dir, c.EtcdPrefix, o.ClusterLogger)
	if err != nil {
		return nil, "", err
	}
	mc := &p.Config
	mc.Logger, mc.EtcdLogger = o.ClusterLogger, o.EtcdLogger
	mc.StaleLearnerAfter = c.Cluster.StaleLearnerAfter
	mc.QuotaBytes = c.QuotaBytes
	if err := p.PrepareData(ctx, boltdb.ExportFile, o.Logger); err != nil {
		return nil, "", err
	}
	m, err := cluster.Start(ctx, *mc)
	if err != nil {
		return nil, "", err
	}
	s, err := openOnMember(ctx, c, m, o.Logger)
	if err != nil {
		m.Close()
		return nil, "", err
	}
	ms := &MemberStore{Store: s, member: m}
	ms.membership = cluster.NewMembership(p, m, func(ctx context.Context) (string, error) {
		return s.ElectionLeader(ctx, o.ControllerElection)
	}, c.Cluster.MoveSlowLeader)
	return ms, "etcd member " + m.Name() + " " + m.ClientURL() + " " + c.EtcdPrefix, nil
}

// openOnMember opens the etcd backend on the local member m only: a
// member cut off from its quorum must fail its own clients' requests, not
// move them elsewhere. The store calls m's etcd server in process
// (cluster.Member.StoreClient), not through its client port.
func openOnMember(ctx context.Context, c Config, m *cluster.Member, log *slog.Logger) (*etcd.Store, error) {
	opts := etcd.Options{
		Endpoints:               []string{"in-process:" + m.ClientURL()},
		Prefix:                  c.EtcdPrefix,
		DialTimeout:             c.EtcdDialTimeout,
		CompactInterval:         c.WatchHistory,
		RequestTimeout:          c.Cluster.RequestTimeout,
		LargeWriteBytesPerSec:   c.Cluster.LargeWriteBytesPerSec,
		EndWatchesWithoutLeader: true,
		LeaderChanged:           m.LeaderChanged,
		ElectionTTL:             clusterElectionTTL(c.Cluster.RequestTimeout),
		Logger:                  log,
		Identity:                m.Name(),
	}
	// The member is ready, but a leader election may be under way (a
	// member restarting into a cluster that lost its leader): the first
	// read needs a leader, so it is retried for a while.
	for deadline := time.Now().Add(time.Minute); ; {
		opts.Client = m.StoreClient() // Open closes it when it fails
		s, err := etcd.Open(ctx, opts)
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		log.Info("The cluster member has no leader yet; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
