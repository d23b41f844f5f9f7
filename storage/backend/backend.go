package backend

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster"
	"github.com/leasehold/leasehold/storage/etcd"
)

// Store is what serve needs of a storage backend. The optional
// capabilities (storage.Backuper, storage.MemoryReleaser) are asserted by
// the caller.
type Store interface {
	storage.Interface
	storage.StatsReporter
	storage.Elector
}

// Config is serve's storage configuration.
type Config struct {
	// Backend is "bbolt" (one file in the data directory) or "etcd".
	Backend      string
	WatchHistory time.Duration
	// WatchHistoryMaxBytes bounds the memory of the bbolt backend's history.
	WatchHistoryMaxBytes int64
	EtcdEndpoints        string // comma-separated client URLs
	EtcdPrefix           string
	EtcdCAFile           string
	EtcdCertFile         string
	EtcdKeyFile          string
	EtcdDialTimeout      time.Duration
	// EtcdAutoSync refreshes the etcd endpoints from the member list: a
	// replica of an embedded cluster (--replica) follows its members.
	EtcdAutoSync bool
	// EtcdIdentity names this server in the etcd backend's election keys
	// (default the host name): a replica's name.
	EtcdIdentity string
	// AcceptMetaFallback opens a bbolt file whose newer meta page is
	// damaged on the older one (boltdb.Options.AcceptMetaFallback).
	AcceptMetaFallback bool
	// Cluster is the embedded etcd member's configuration (Backend
	// "cluster", chosen by --cluster-init or --join).
	Cluster Cluster
}

// Cluster holds the flags of an embedded etcd member.
type Cluster struct {
	Init bool
	Join string // any member's API URL
	// Replica makes --join obtain a client certificate and the members'
	// client URLs instead of running a member: the server is then an
	// API-only replica on the etcd backend. A data directory that holds a
	// replica's files sets it.
	Replica bool
	// Rejoin is set when the data directory already holds a member: it
	// restarts as one with no cluster flag at all.
	Rejoin        bool
	Token         string
	TokenFile     string
	PeerListen    string // host:port of the etcd peer listener
	ClientListen  string // host:port of the etcd client listener
	Name          string // the member's name (default: host name and peer port)
	AdvertiseHost string // the address other members reach this one at
	// RequestTimeout bounds each storage request of a member, so that one
	// cut off from its quorum answers errors instead of hanging.
	RequestTimeout time.Duration

	// Member is the member to start, filled in by the composition root
	// once the member's certificates and state are in place (the join
	// handshake happens over HTTP, which storage does not speak).
	Member *cluster.Config
}

// Enabled reports whether serve runs an embedded etcd member.
func (c *Cluster) Enabled() bool { return !c.Replica && (c.Init || c.Join != "" || c.Rejoin) }

// RegisterFlags adds the storage flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.WatchHistory, "watch-history", 5*time.Minute, "how long recent changes are kept for resuming watches and paginated lists (older resourceVersions get 410 Expired)")
	fs.Int64Var(&c.WatchHistoryMaxBytes, "watch-history-max-bytes", boltdb.DefaultHistoryMaxBytes, "most memory, in `bytes`, the recent changes of --watch-history may hold (bbolt storage): under heavy write load this bound, not the duration, decides how far back watches can resume")
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
	fs.BoolVar(&c.AcceptMetaFallback, "accept-meta-fallback", false, "open a database whose newer meta page is damaged on the older one, which may lose the last committed write (default: refuse to start)")
}

// Validate checks the parsed flags.
func (c *Config) Validate() error {
	if cl := &c.Cluster; cl.Replica {
		switch {
		case cl.Init:
			return errors.New("--replica joins an existing cluster: use it with --join, not --cluster-init")
		case cl.Rejoin:
			return errors.New("--replica: the data directory holds a cluster member; a member cannot become a replica (use another --data-dir)")
		case c.Backend != "bbolt":
			return fmt.Errorf("--storage %s cannot be combined with --replica (the cluster's etcd is the storage)", c.Backend)
		case cl.Token != "" && cl.TokenFile != "":
			return errors.New("give --cluster-token or --cluster-token-file, not both")
		}
		if c.EtcdDialTimeout <= 0 {
			return fmt.Errorf("invalid --etcd-dial-timeout %s: must be positive", c.EtcdDialTimeout)
		}
		// The composition root runs the handshake (or reads the stored
		// replica) and then chooses the etcd backend.
		c.Backend = "replica"
		return nil
	}
	if cl := &c.Cluster; cl.Enabled() {
		if cl.Init && cl.Join != "" {
			return errors.New("--cluster-init and --join exclude each other: a cluster starts once, then members join it")
		}
		if c.Backend != "bbolt" {
			return fmt.Errorf("--storage %s cannot be combined with --cluster-init, --join, or a data directory that holds a cluster member (the embedded etcd member is the storage)", c.Backend)
		}
		if cl.Token != "" && cl.TokenFile != "" {
			return errors.New("give --cluster-token or --cluster-token-file, not both")
		}
		if _, _, err := net.SplitHostPort(cl.PeerListen); err != nil {
			return fmt.Errorf("invalid --peer-listen %q: %w", cl.PeerListen, err)
		}
		if cl.ClientListen != "" {
			if _, _, err := net.SplitHostPort(cl.ClientListen); err != nil {
				return fmt.Errorf("invalid --cluster-client-listen %q: %w", cl.ClientListen, err)
			}
		}
		if cl.RequestTimeout <= 0 {
			return fmt.Errorf("invalid --cluster-request-timeout %s: must be positive", cl.RequestTimeout)
		}
		c.Backend = "cluster"
		return nil
	}
	switch c.Backend {
	case "bbolt":
	case "etcd":
		if len(splitList(c.EtcdEndpoints)) == 0 {
			return errors.New("--storage etcd needs --etcd-endpoints")
		}
		if c.EtcdDialTimeout <= 0 {
			return fmt.Errorf("invalid --etcd-dial-timeout %s: must be positive", c.EtcdDialTimeout)
		}
	default:
		return fmt.Errorf("invalid --storage %q: use bbolt or etcd", c.Backend)
	}
	return nil
}

// Shared reports whether several replicas may share the backend, so that
// a replica's election controller runs only while the store elects it.
func (c *Config) Shared() bool {
	return c.Backend == "etcd" || c.Backend == "cluster" || c.Backend == "replica"
}

// MemberStore is the store of an embedded etcd member: the etcd backend
// over the member's own client URL, which closes the member with it.
type MemberStore struct {
	*etcd.Store
	member *cluster.Member
}

// Member is the running etcd member, for the membership operations.
func (s *MemberStore) Member() *cluster.Member { return s.member }

// Backup streams a snapshot of the member's etcd database (etcd's
// maintenance Snapshot, taken by this member): GET /leasehold/v1/backup and
// "leasehold backup" on a member.
func (s *MemberStore) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return s.member.Snapshot(ctx, w)
}

// Close closes the store, then stops the member.
func (s *MemberStore) Close() error {
	err := s.Store.Close()
	s.member.Close()
	return err
}

func openMember(ctx context.Context, c Config, log *slog.Logger) (Store, string, error) {
	mc := c.Cluster.Member
	if mc == nil {
		return nil, "", errors.New("the cluster member is not prepared")
	}
	if mc.Logger == nil {
		mc.Logger = log
	}
	if err := prepareMemberData(ctx, c, log); err != nil {
		return nil, "", err
	}
	m, err := cluster.Start(ctx, *mc)
	if err != nil {
		return nil, "", err
	}
	tlsCfg, err := etcd.TLSConfig(mc.Paths.CAFile, mc.Paths.CertFile, mc.Paths.KeyFile)
	if err != nil {
		m.Close()
		return nil, "", err
	}
	opts := etcd.Options{
		// The local member only: a member cut off from its quorum must
		// fail its own clients' requests, not move them elsewhere.
		Endpoints:               []string{m.ClientURL()},
		Prefix:                  c.EtcdPrefix,
		TLS:                     tlsCfg,
		DialTimeout:             c.EtcdDialTimeout,
		CompactInterval:         c.WatchHistory,
		RequestTimeout:          c.Cluster.RequestTimeout,
		EndWatchesWithoutLeader: true,
		Logger:                  log,
		Identity:                m.Name(),
	}
	// The member is ready, but a leader election may be under way (a
	// member restarting into a cluster that lost its leader): the first
	// read needs a leader, so it is retried for a while.
	var s *etcd.Store
	for deadline := time.Now().Add(time.Minute); ; {
		if s, err = etcd.Open(ctx, opts); err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			m.Close()
			return nil, "", err
		}
		log.Info("The cluster member has no leader yet; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return &MemberStore{Store: s, member: m}, "etcd member " + m.Name() + " " + m.ClientURL() + " " + c.EtcdPrefix, nil
}

// Open opens the configured backend; a bbolt database lives in dataDir.
// onCommit, when set, observes bbolt's commits. The returned string names
// the backend in logs and the UI: the bbolt file, or the etcd endpoints
// and prefix.
func Open(ctx context.Context, c Config, dataDir string, onCommit func(d time.Duration, writes int, err error), log *slog.Logger) (Store, string, error) {
	if c.Backend == "cluster" {
		return openMember(ctx, c, log)
	}
	if c.Backend == "replica" {
		return nil, "", errors.New("the replica is not prepared")
	}
	if c.Backend == "etcd" {
		tlsCfg, err := etcd.TLSConfig(c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile)
		if err != nil {
			return nil, "", err
		}
		var autoSync, requestTimeout time.Duration
		if c.EtcdAutoSync {
			autoSync = time.Minute
		}
		if c.Cluster.Replica { // bounded requests that fail over between the members
			requestTimeout = c.Cluster.RequestTimeout
		}
		s, err := etcd.Open(ctx, etcd.Options{
			Endpoints:   splitList(c.EtcdEndpoints),
			Prefix:      c.EtcdPrefix,
			TLS:         tlsCfg,
			DialTimeout: c.EtcdDialTimeout,
			// etcd keeps history until compacted: compact so that
			// --watch-history of it stays, as on bbolt.
			CompactInterval:  c.WatchHistory,
			Logger:           log,
			AutoSyncInterval: autoSync,
			RequestTimeout:   requestTimeout,
			Identity:         c.EtcdIdentity,
		})
		if err != nil {
			return nil, "", err
		}
		return s, "etcd " + c.EtcdEndpoints + " " + c.EtcdPrefix, nil
	}
	dbPath := filepath.Join(dataDir, "leasehold.db")
	s, err := boltdb.Open(ctx, dbPath, boltdb.Options{HistoryWindow: c.WatchHistory, HistoryMaxBytes: c.WatchHistoryMaxBytes, Logger: log, OnCommit: onCommit,
		AcceptMetaFallback: c.AcceptMetaFallback})
	if err != nil {
		return nil, "", fmt.Errorf("open database %s: %w", dbPath, err)
	}
	return s, dbPath, nil
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
