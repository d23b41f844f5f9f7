package backend

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/boltdb"
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
	// AcceptMetaFallback opens a bbolt file whose newer meta page is
	// damaged on the older one (boltdb.Options.AcceptMetaFallback).
	AcceptMetaFallback bool
}

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
	fs.BoolVar(&c.AcceptMetaFallback, "accept-meta-fallback", false, "open a database whose newer meta page is damaged on the older one, which may lose the last committed write (default: refuse to start)")
}

// Validate checks the parsed flags.
func (c *Config) Validate() error {
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
func (c *Config) Shared() bool { return c.Backend == "etcd" }

// Open opens the configured backend; a bbolt database lives in dataDir.
// onCommit, when set, observes bbolt's commits. The returned string names
// the backend in logs and the UI: the bbolt file, or the etcd endpoints
// and prefix.
func Open(ctx context.Context, c Config, dataDir string, onCommit func(d time.Duration, writes int, err error), log *slog.Logger) (Store, string, error) {
	if c.Backend == "etcd" {
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
			CompactInterval: c.WatchHistory,
			Logger:          log,
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
