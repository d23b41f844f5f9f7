package boltdb

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/storagetest"
)

var quietLogger = slog.New(slog.DiscardHandler)

// openTemp opens a store on a fresh file and closes it when the test ends.
func openTemp(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		// A small watch queue so the slow-watcher test ends quickly.
		s, _ := openTemp(t, Options{WatchQueueLimit: storagetest.SlowWatcherWrites / 4})
		return s
	})
}
