package boltdb

import (
	"log/slog"
	"time"
)

// DefaultHistoryMaxBytes is Options.HistoryMaxBytes's default.
const DefaultHistoryMaxBytes = 16 << 20

// DefaultQuotaBytes is Options.QuotaBytes's default: room for about
// 150,000 leases as client-go writes them (about 800 bytes each, key
// included).
const DefaultQuotaBytes = 128 << 20

// LargeValueBytes is the size above which a value counts as large: a
// Lease or LeaseCandidate as client-go writes it is about one kilobyte.
// Large values may hold at most a quarter of the quota between them
// (Options.QuotaBytes), so that a client writing big objects cannot fill
// the store that leader election needs to renew in.
const LargeValueBytes = 64 << 10

// Options tune a Store. The zero value selects the defaults.
type Options struct {
	// HistoryWindow is how long events stay replayable (default 5m).
	HistoryWindow time.Duration
	// HistoryMaxEvents caps the number of retained events (default 100000).
	HistoryMaxEvents int
	// HistoryMaxBytes caps the memory the retained events hold, estimated
	// from their keys and values (default 16 MiB). Under heavy write load
	// it, not the window, bounds the history: at 10,000 writes/s of 700-byte
	// values 16 MiB is about two seconds, at 100/s the whole window.
	HistoryMaxBytes int64
	// QuotaBytes caps the bytes of keys and values the store holds, all
	// of which it keeps in memory (default DefaultQuotaBytes): a write
	// that would grow the data past it fails with ErrQuotaExceeded, and
	// so does one that would take the values over LargeValueBytes past a
	// quarter of it. Writes that do not grow the data (a renewal of the
	// same size, a smaller value, a delete) always pass, so a full store
	// keeps renewing its leases.
	QuotaBytes int64
	// MaxValueBytes is the largest accepted value (default 1.5 MiB, etcd's
	// default request limit); larger writes fail with ErrValueTooLarge.
	MaxValueBytes int
	// WatchQueueLimit is how many undelivered responses a watcher may
	// accumulate before it is ended with ErrCompacted (default 10000).
	WatchQueueLimit int
	// MaxBatch caps the number of writes committed in one transaction
	// (default 4096).
	MaxBatch int
	// CommitDelay is how long the writer waits, after the first write of
	// a transaction arrives, for more writes to commit with it (default 0:
	// it commits what is queued at once). Each bbolt commit writes at
	// least four pages (the leaves written, their branch, the root
	// bucket's page, the meta page) and syncs twice whatever it carries,
	// so on a device that renews a few leases at a time a delay divides
	// the bytes written per renewal, at the cost of that much latency on
	// every write. A write is still answered only after its transaction
	// is synced.
	CommitDelay time.Duration
	// InitialMmapSize is passed to bbolt so that growth does not remap
	// (and block readers of the file) early (default 64 MiB).
	InitialMmapSize int
	// OpenTimeout bounds the wait for the file lock held by another
	// process (default 2s).
	OpenTimeout time.Duration
	// AcceptMetaFallback opens a file whose newer meta page is damaged on
	// the older one, which may lose the last committed transaction; without
	// it Open refuses such a file with ErrDamaged.
	AcceptMetaFallback bool
	// Logger receives operational messages (default slog.Default()).
	Logger *slog.Logger
	// OnCommit, when set, is called by the writer after every bbolt
	// transaction with its duration (fsync included), the number of
	// writes it carried and its error. It runs on the writer goroutine:
	// it must be quick (a metrics observation). A callback keeps this
	// package free of any metrics library.
	OnCommit func(d time.Duration, writes int, err error)
}

func (o Options) withDefaults() Options {
	if o.HistoryWindow <= 0 {
		o.HistoryWindow = 5 * time.Minute
	}
	if o.HistoryMaxEvents <= 0 {
		o.HistoryMaxEvents = 100000
	}
	if o.HistoryMaxBytes <= 0 {
		o.HistoryMaxBytes = DefaultHistoryMaxBytes
	}
	if o.QuotaBytes <= 0 {
		o.QuotaBytes = DefaultQuotaBytes
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 3 << 19 // 1.5 MiB
	}
	if o.WatchQueueLimit <= 0 {
		o.WatchQueueLimit = 10000
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 4096
	}
	if o.InitialMmapSize <= 0 {
		o.InitialMmapSize = 64 << 20
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
