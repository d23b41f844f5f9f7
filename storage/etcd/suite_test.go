package etcd

import (
	"context"
	"log/slog"
	"testing"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/etcd/etcdtest"
	"github.com/leasehold/leasehold/storage/storagetest"
)

var quietLogger = slog.New(slog.DiscardHandler)

// open connects a store to endpoints and closes it when the test ends.
func open(t testing.TB, endpoints []string, opts Options) *Store {
	t.Helper()
	opts.Endpoints = endpoints
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	if opts.CompactInterval == 0 {
		opts.CompactInterval = -1
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the storage contract suite on one etcd member.
func TestConformance(t *testing.T) {
	c := etcdtest.Start(t, 1)
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		// A small watch queue so the slow-watcher test ends quickly.
		return open(t, c.Endpoints(), Options{Prefix: "/conformance", WatchQueueLimit: storagetest.SlowWatcherWrites / 4})
	})
}
