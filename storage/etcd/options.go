package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Options configure a Store. Endpoints is required; the zero value of every
// other field selects its default.
type Options struct {
	// Endpoints are the etcd client URLs (http://host:2379 or https://...).
	// List every member (or one load balancer): the client fails over
	// between them.
	Endpoints []string
	// Client, when set, is used instead of dialing Endpoints (which then
	// only name it in logs), and closed by Close: an embedded cluster
	// member's in-process client of its own etcd server
	// (storage/cluster's StoreClient), which skips the loopback TLS,
	// HTTP/2 and protobuf of the client port.
	Client *clientv3.Client
	// Prefix is prepended to every key, so that several installations can
	// share one etcd cluster (default "/leasehold"). Keys under
	// Prefix+"/_leasehold/" are the backend's own (elections, compaction).
	Prefix string
	// TLS, when set, secures the client connections (see TLSConfig).
	TLS *tls.Config
	// DialTimeout bounds connecting at Open (default 5s).
	DialTimeout time.Duration
	// MaxValueBytes is the largest accepted value (default 1.5 MiB, etcd's
	// default --max-request-bytes); larger writes fail with
	// ErrValueTooLarge without a round trip.
	MaxValueBytes int
	// LargeWriteBytesPerSec, when positive, limits the bytes per second
	// of values larger than LargeValueBytes (default 64 KiB) that this
	// store writes: a write waits for its turn (within its context), and
	// fails with storage.ErrTimeout, unsent, when its context would end
	// first. Every write of an etcd cluster goes through one raft log and
	// every member's WAL fsync: large entries ahead of small ones delay
	// the renewals queued behind them. 0 leaves large writes unlimited.
	LargeWriteBytesPerSec int64
	LargeValueBytes       int
	// WatchQueueLimit is how many undelivered responses a watcher may
	// accumulate before it is ended with ErrCompacted (default 10000).
	WatchQueueLimit int
	// CompactInterval is how often etcd's history is compacted, keeping at
	// least one interval of it, as kube-apiserver's compactor does (default
	// 5m; negative disables, e.g. when another client compacts).
	CompactInterval time.Duration
	// ElectionTTL is the etcd lease time-to-live behind Campaign: how long
	// a crashed leader keeps leadership (default 3s, whole seconds).
	ElectionTTL time.Duration
	// Logger receives operational messages (default slog.Default()).
	Logger *slog.Logger

	// RequestTimeout, when positive, bounds every read and write, and
	// each then requires the member to know a raft leader and is tried
	// once, so that a member cut off from its quorum fails fast (etcd's
	// "no leader") instead of waiting for etcd's own request timeout or
	// retrying until this one. The embedded
	// cluster (storage/cluster) sets it; 0 keeps the caller's deadline.
	// With several endpoints (or AutoSyncInterval), reads and writes go
	// to a healthy endpoint instead and move to another one when that is
	// safe (failover.go): an API-only replica of an embedded cluster. A
	// request that ran out of time, and a write sent but not answered,
	// fail with storage.ErrTimeout.
	RequestTimeout time.Duration
	// EndWatchesWithoutLeader ends watches with an error when the member
	// loses its leader, instead of resuming them on another member: with
	// one local member as the only endpoint there is none to move to, and
	// the API's watchers must relist elsewhere.
	EndWatchesWithoutLeader bool
	// LeaderChanged, on a store of one local member, returns a channel
	// that closes at the member's next raft leader change (etcd's
	// EtcdServer.LeaderChangedNotify): writes sent before it and still
	// unanswered shortly after end with storage.ErrTimeout instead of
	// waiting out RequestTimeout for a leader that died
	// (leaderchange.go).
	LeaderChanged func() <-chan struct{}
	// AutoSyncInterval, when positive, refreshes Endpoints from the
	// cluster's member list that often, so that a replica of an embedded
	// cluster follows members that join or are removed.
	AutoSyncInterval time.Duration
	// Identity names this server in its election keys (default the host
	// name; the process ID and a nonce follow), so that operators see
	// which one leads: a cluster member's name, for instance.
	Identity string
}

func (o Options) withDefaults() (Options, error) {
	if len(o.Endpoints) == 0 {
		return o, errors.New("no etcd endpoints given")
	}
	if o.Prefix == "" {
		o.Prefix = "/leasehold"
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 3 << 19 // 1.5 MiB
	}
	if o.LargeValueBytes <= 0 {
		o.LargeValueBytes = 64 << 10
	}
	if o.WatchQueueLimit <= 0 {
		o.WatchQueueLimit = 10000
	}
	if o.CompactInterval == 0 {
		o.CompactInterval = 5 * time.Minute
	}
	if o.ElectionTTL <= 0 {
		o.ElectionTTL = 3 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// TLSConfig builds a client TLS configuration from PEM files, with the
// meaning of kube-apiserver's --etcd-cafile, --etcd-certfile and
// --etcd-keyfile: caFile verifies the servers (system roots when empty),
// certFile and keyFile (both or neither) authenticate this client. It
// returns nil when all three are empty.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("etcd client certificate and key must be given together")
	}
	if certFile != "" {
		if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		// Read at each handshake: a renewed certificate (an embedded
		// cluster's replica renews its own, keeping its key) is used from
		// the next connection on, without a restart.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("etcd client certificate: %w", err)
			}
			return &cert, nil
		}
	}
	return cfg, nil
}
