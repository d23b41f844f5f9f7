package boltdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/leasehold/leasehold/storage"
)

// Store is a bbolt-backed storage.Interface. Create it with Open.
type Store struct {
	opts Options
	db   *bolt.DB
	path string
	log  *slog.Logger

	// snap is the published state: an immutable snapshot that readers
	// load and use without any lock, so no reader can hold up the writer
	// and no writer can hold up a reader (see snapshot).
	snap atomic.Pointer[snapshot]
	// mu serialises the changes of snap (the writer's publish, Compact,
	// the idle trim) and guards watchers, so that a new watcher sees
	// each round either in its replay or live, never twice or not at
	// all. Readers never take it.
	mu       sync.Mutex
	watchers map[*watcher]struct{}
	// listPause, when set (by tests), runs halfway through each List.
	listPause func()

	// closeMu orders enqueueing against Close so that no request is sent
	// on a closed queue.
	closeMu    sync.RWMutex
	closed     atomic.Bool
	queue      chan *op
	writerDone chan struct{}
	commits    atomic.Int64 // bbolt transactions committed, for benchmarks
	// commitFailed is set by a failed commit: what the file holds after
	// a failed write or sync is not vouched for, so Close then leaves no
	// clean-close marker and the next Open walks every page.
	commitFailed atomic.Bool
}

var (
	_ storage.Interface     = (*Store)(nil)
	_ storage.StatsReporter = (*Store)(nil)
)

// Open opens (creating if needed) the store at path and loads its current
// state into memory. A file that is not a leasehold store fails with an
// error wrapping ErrFormat.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := checkMappable(path); err != nil {
		return nil, fmt.Errorf("boltdb: open: %w", err)
	}
	if err := waitUnlocked(path, opts.OpenTimeout); err != nil {
		return nil, err
	}
	clean, err := readCleanMarker(path)
	if err != nil {
		return nil, err
	}
	fallback, walked, err := checkFile(path, opts.AcceptMetaFallback, clean)
	if err != nil {
		return nil, err
	}
	if fallback != "" {
		opts.Logger.WarnContext(ctx, "Opening a damaged database on its older meta page, as --accept-meta-fallback asks", "detail", fallback)
	}
	fileCheck := "pages walked"
	if !walked {
		fileCheck = "new file"
		if clean != "" {
			fileCheck = "skipped after a clean close"
		}
	}
	// From here on the file may change: a crash must find no marker.
	if clean != "" {
		if err := clearCleanMarker(path); err != nil {
			return nil, err
		}
	}
	db, err := openBolt(path, 0o600, &bolt.Options{
		Timeout:         opts.OpenTimeout,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: opts.InitialMmapSize,
	})
	if err != nil {
		return nil, fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	s := &Store{
		opts:       opts,
		db:         db,
		path:       path,
		log:        opts.Logger,
		watchers:   make(map[*watcher]struct{}),
		queue:      make(chan *op, 1024),
		writerDone: make(chan struct{}),
	}
	if err := s.load(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	releaseMapped(db)
	go s.writer()
	go s.trimIdle()
	sn := s.snap.Load()
	s.log.InfoContext(ctx, "storage opened", "path", path, "revision", sn.rev, "keys", sn.index.len(), "dataBytes", sn.data.total,
		"fileCheck", fileCheck)
	if sn.data.total > opts.QuotaBytes {
		s.log.WarnContext(ctx, "stored keys and values exceed the storage quota: writes that grow them will be refused until some are deleted or the quota is raised",
			"dataBytes", sn.data.total, "quotaBytes", opts.QuotaBytes)
	}
	return s, nil
}

// load initialises or validates the file and reads every key into memory.
// The history starts empty, so the compact revision is the current one.
func (s *Store) load(ctx context.Context) (err error) {
	// bbolt panics on some kinds of page corruption, and a damaged page id
	// points outside the mapping, which faults: make a fault a panic for
	// this goroutine, and report either instead of dying.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: reading the file panicked: %v", ErrFormat, p)
		}
	}()
	// Check read-only first so that a refused file is left byte-identical;
	// only a brand-new (bucketless) file is written to.
	fresh := false
	if err := s.db.View(func(tx *bolt.Tx) error {
		fresh = tx.Bucket(bucketMeta) == nil
		if fresh {
			return nil
		}
		return checkFormat(tx)
	}); err != nil {
		return err
	}
	if fresh {
		if err := s.db.Update(initOrCheck); err != nil {
			return err
		}
	}
	return s.db.View(func(tx *bolt.Tx) error {
		sn := &snapshot{rev: int64(decodeRev(tx.Bucket(bucketMeta).Get(metaRevision)))}
		c := tx.Bucket(bucketKV).Cursor()
		var index sortedBuilder // the cursor gives the keys in order
		last := ""
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			// bbolt memory is only valid inside the transaction; copy.
			kv, err := decodeRecord(k, append([]byte(nil), v...))
			if err != nil {
				return err
			}
			if kv.Key <= last {
				return fmt.Errorf("%w: key %q follows key %q in the file", ErrFormat, kv.Key, last)
			}
			last = kv.Key
			if kv.ModRevision > sn.rev {
				return fmt.Errorf("%w: key %q has revision %d above the store revision %d", ErrFormat, k, kv.ModRevision, sn.rev)
			}
			index.add(kv)
			sn.data.add(kv.Key, kv.Value, 1)
		}
		sn.index = index.tree()
		sn.compactRev = sn.rev
		s.snap.Store(sn)
		return nil
	})
}

// Close waits for queued writes to commit, ends every watch with ErrClosed
// and closes the file. Later calls fail with ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed.Load() {
		s.closeMu.Unlock()
		return nil
	}
	s.closed.Store(true)
	close(s.queue)
	s.closeMu.Unlock()
	<-s.writerDone

	s.mu.Lock()
	rev := s.snap.Load().rev
	for w := range s.watchers {
		w.terminate(storage.WatchResponse{Revision: rev, Err: storage.ErrClosed}, false)
		delete(s.watchers, w)
	}
	s.mu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltdb: close %s: %w", s.path, err)
	}
	// Every commit is synced and the file closed: the next Open may skip
	// its page walk (cleanclose.go). Without the marker it walks them,
	// which is only slower.
	if s.commitFailed.Load() {
		return nil
	}
	if err := writeCleanMarker(s.path); err != nil {
		s.log.Warn("Recording the clean close failed: the next start checks every page of the file", "path", s.path, "err", err)
	}
	return nil
}

// Get returns the latest value of key from memory.
func (s *Store) Get(ctx context.Context, key string) (storage.KeyValue, error) {
	if s.closed.Load() {
		return storage.KeyValue{}, storage.ErrClosed
	}
	kv, ok := s.snap.Load().index.get(key)
	if !ok {
		return storage.KeyValue{}, fmt.Errorf("get %q: %w", key, storage.ErrNotFound)
	}
	return kv, nil
}

// CurrentRevision returns the revision of the last committed write.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, storage.ErrClosed
	}
	return s.snap.Load().rev, nil
}

// CompactRevision returns the oldest revision Watch and List can start from.
func (s *Store) CompactRevision(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, storage.ErrClosed
	}
	return s.snap.Load().compactRev, nil
}

// Compact forgets the history up to and including revision. Compacting an
// already compacted revision is a no-op.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.snap.Load()
	if revision > cur.rev {
		return fmt.Errorf("compact to %d (current %d): %w", revision, cur.rev, storage.ErrFutureRevision)
	}
	if revision > cur.compactRev {
		next := *cur
		next.hist.dropFront(int(revision - next.compactRev))
		next.compactRev = revision
		s.snap.Store(&next)
	}
	return nil
}

// trim applies the retention limits to sn, a snapshot not yet published.
func (s *Store) trim(sn *snapshot, now time.Time) {
	h := &sn.hist
	n := 0
	if over := h.len() - s.opts.HistoryMaxEvents; over > 0 {
		n = over
	}
	cutoff := now.Add(-s.opts.HistoryWindow).UnixNano()
	for n < h.len() && h.get(n).at < cutoff {
		n++
	}
	// The byte bound: drop the oldest events until the rest fit.
	if excess := h.bytes - s.opts.HistoryMaxBytes; excess > 0 {
		for i := 0; i < n; i++ {
			excess -= eventBytes(&h.get(i).ev)
		}
		for ; excess > 0 && n < h.len(); n++ {
			excess -= eventBytes(&h.get(n).ev)
		}
	}
	if n > 0 {
		h.dropFront(n)
		sn.compactRev += int64(n)
	}
}

// trimIdle applies the history's time window while no writes come:
// publish trims only when it records an event, and without this an idle
// store would keep its last burst of history (up to HistoryMaxBytes)
// forever. It ends when the writer does.
func (s *Store) trimIdle() {
	every := min(max(s.opts.HistoryWindow/10, time.Second), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.writerDone:
			return
		case now := <-t.C:
			s.mu.Lock()
			next := *s.snap.Load()
			if s.trim(&next, now); next.compactRev != s.snap.Load().compactRev {
				s.snap.Store(&next)
			}
			s.mu.Unlock()
		}
	}
}

// The optional capabilities of the storage contract that the bbolt
// backend offers.
var (
	_ storage.Backuper       = (*Store)(nil)
	_ storage.MemoryReleaser = (*Store)(nil)
)

// ReleaseMemory drops the database file's pages from the process's
// resident memory, as Open does after loading: reads are served from
// memory, and commits map back only the pages they update. Call it when
// the server goes idle; the pages stay in the page cache.
func (s *Store) ReleaseMemory() {
	s.closeMu.RLock() // Close takes it before closing the file
	defer s.closeMu.RUnlock()
	if !s.closed.Load() {
		releaseMapped(s.db)
	}
}

// Stats describes the store.
func (s *Store) Stats(ctx context.Context) (storage.Stats, error) {
	if s.closed.Load() {
		return storage.Stats{}, storage.ErrClosed
	}
	st := storage.Stats{Backend: "boltdb"}
	sn := s.snap.Load()
	st.Revision, st.CompactRevision, st.Keys = sn.rev, sn.compactRev, int64(sn.index.len())
	st.DataBytes, st.QuotaBytes = sn.data.total, s.opts.QuotaBytes
	if fi, err := os.Stat(s.path); err == nil {
		st.SizeBytes = fi.Size()
	}
	return st, nil
}

// Backup writes a consistent copy of the database file to w while the store
// keeps serving, and returns the number of bytes written. The copy can be
// opened with Open.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if s.closed.Load() {
		return 0, storage.ErrClosed
	}
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx: ctx, w: w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("boltdb: backup: %w", err)
	}
	return n, nil
}

// Verify runs bbolt's consistency check over the whole file (page
// reachability, no double frees, key order). It reads every page: use it
// for diagnostics, not on a hot path.
func (s *Store) Verify(ctx context.Context) error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	return s.db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: %s: %w", ErrFormat, s.path, errors.Join(errs...))
		}
		return ctx.Err()
	})
}

// ctxWriter aborts a long backup when its context ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
