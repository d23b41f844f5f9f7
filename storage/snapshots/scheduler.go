package snapshots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// Source is the database a Scheduler snapshots.
type Source struct {
	// Backup writes a consistent copy of the database to w
	// (storage.Backuper).
	Backup func(ctx context.Context, w io.Writer) (int64, error)
	// Barrier, on a cluster member, is the linearizable read through the
	// raft leader that each snapshot starts with; the snapshot's revision
	// must reach its answer (storage.BackupBarrier). Nil on a single
	// device, whose copy is of the one writer's committed state.
	Barrier func(ctx context.Context) (int64, error)
	// Size estimates a snapshot's bytes (the database file's size), for
	// the free-space check before it is taken; nil or an error: the
	// previous snapshot's size.
	Size func(ctx context.Context) (int64, error)
}

// Options configure a Scheduler.
type Options struct {
	Flags
	Source
	Logger *slog.Logger
	// SettleDelay is the least time between the server's start and its
	// first snapshot (default: 5 minutes, or the interval when shorter),
	// so that a start (a join, an import) is not slowed by one.
	SettleDelay time.Duration
}

// Scheduler takes the snapshots on schedule (Run) and reports them
// (Status).
type Scheduler struct {
	opts Options
	log  *slog.Logger

	mu          sync.Mutex
	next        time.Time
	last        *clusterapi.SnapshotRun
	lastSuccess *clusterapi.SnapshotRun
	runs        map[string]uint64
}

// defaultSettleDelay is Options.SettleDelay's default.
const defaultSettleDelay = 5 * time.Minute

// retryAfter bounds the wait after a failed or refused snapshot: it is
// tried again sooner than the interval, as the cause (no quorum, a full
// disk) may pass.
const retryAfter = 10 * time.Minute

// New returns a scheduler; it takes nothing until Run.
func New(opts Options) *Scheduler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SettleDelay <= 0 {
		opts.SettleDelay = defaultSettleDelay
	}
	if opts.Retention < 1 {
		opts.Retention = 1
	}
	return &Scheduler{opts: opts, log: opts.Logger, runs: map[string]uint64{
		clusterapi.SnapshotOK: 0, clusterapi.SnapshotRefusedLowSpace: 0, clusterapi.SnapshotFailed: 0}}
}

// Run takes a snapshot every interval until ctx ends. The first is due
// one interval after the newest snapshot in the directory (so restarts do
// not reset the schedule), and no sooner than SettleDelay after the
// start.
func (s *Scheduler) Run(ctx context.Context) {
	if s.opts.Interval <= 0 {
		return
	}
	dir := s.opts.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.log.Error("Scheduled snapshots are off: cannot create their directory", "dir", dir, "err", err.Error())
		return
	}
	s.removeLeftovers()
	now := time.Now()
	next := now.Add(min(s.opts.Interval, s.opts.SettleDelay))
	if files, err := List(ctx, dir, false); err == nil && len(files) > 0 {
		if due := files[0].Time.Add(s.opts.Interval); due.After(next) {
			// Re-based on the monotonic clock: a wall-clock step does not
			// move it.
			next = now.Add(due.Sub(now))
		}
	}
	s.log.Info("Scheduled snapshots", "dir", dir, "interval", s.opts.Interval.String(), "retention", s.opts.Retention,
		"min_free_bytes", s.opts.MinFreeBytes, "next", next.UTC().Format(time.RFC3339))
	for {
		s.mu.Lock()
		s.next = next
		s.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		start := time.Now()
		run := s.TakeOne(ctx)
		if ctx.Err() != nil {
			return
		}
		next = start.Add(s.opts.Interval)
		if run.Result != clusterapi.SnapshotOK {
			next = time.Now().Add(min(s.opts.Interval, retryAfter))
		}
		if now := time.Now(); next.Before(now) {
			next = now // a snapshot longer than the interval: the next at once
		}
	}
}

// TakeOne takes one snapshot now, prunes the old ones and records the
// result (Status), which it returns.
func (s *Scheduler) TakeOne(ctx context.Context) clusterapi.SnapshotRun {
	start := time.Now()
	run := clusterapi.SnapshotRun{Time: start.UTC()}
	path, rev, size, err := s.take(ctx, start)
	run.DurationMs = time.Since(start).Milliseconds()
	run.FreeBytes, _ = freeBytes(s.opts.Dir)
	switch {
	case err == nil:
		run.Result, run.File, run.Revision, run.SizeBytes = clusterapi.SnapshotOK, filepath.Base(path), rev, size
		s.log.Info("Wrote a snapshot", "file", path, "revision", rev, "bytes", size,
			"duration", time.Duration(run.DurationMs*int64(time.Millisecond)).String(), "free_bytes", run.FreeBytes)
		if err := s.prune(ctx); err != nil {
			s.log.Warn("Removing old snapshots failed", "dir", s.opts.Dir, "err", err.Error())
		}
	case errors.Is(err, ErrLowSpace):
		run.Result, run.Error = clusterapi.SnapshotRefusedLowSpace, err.Error()
		s.log.Error("Refused a scheduled snapshot: the disk is too full", "err", err.Error(),
			"remedy", "free space there, lower --snapshot-retention or --snapshot-min-free-bytes, or move --snapshot-dir to another disk")
	default:
		run.Result, run.Error = clusterapi.SnapshotFailed, err.Error()
		if ctx.Err() == nil {
			s.log.Error("A scheduled snapshot failed", "err", err.Error())
		}
	}
	s.mu.Lock()
	s.last = &run
	if run.Result == clusterapi.SnapshotOK {
		s.lastSuccess = &run
	}
	s.runs[run.Result]++
	s.mu.Unlock()
	return run
}

// take writes, checks and names one snapshot, and returns its path,
// revision and size.
func (s *Scheduler) take(ctx context.Context, start time.Time) (string, int64, int64, error) {
	dir := s.opts.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", 0, 0, fmt.Errorf("snapshots: %w", err)
	}
	free, err := freeBytes(dir)
	if err != nil {
		return "", 0, 0, err
	}
	estimate := s.estimate(ctx)
	if free-estimate < s.opts.MinFreeBytes {
		return "", 0, 0, fmt.Errorf("%w: %s has %d bytes free, and a snapshot of about %d bytes would leave less than the floor of %d (--snapshot-min-free-bytes)",
			ErrLowSpace, dir, free, estimate, s.opts.MinFreeBytes)
	}
	var barrier int64
	if s.opts.Barrier != nil {
		if barrier, err = s.opts.Barrier(ctx); err != nil {
			return "", 0, 0, err
		}
	}
	tmp, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return "", 0, 0, fmt.Errorf("snapshots: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	var rev, size int64
	err = onIdleThread(func() error {
		pf := &pacedFile{ctx: ctx, f: tmp, dir: dir, bytesPerSec: s.opts.BytesPerSec, minFree: s.opts.MinFreeBytes, start: time.Now()}
		_, err := s.opts.Backup(ctx, pf)
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		size = pf.written
		if err == nil {
			// The last few MiB were written after the last check.
			err = pf.checkSpace()
		}
		if errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("%w: %s filled up while the snapshot was written: %w", ErrLowSpace, dir, err)
		}
		if err != nil {
			return err
		}
		if rev, err = Check(ctx, tmp.Name()); err != nil {
			return fmt.Errorf("the snapshot did not check out: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", 0, 0, err
	}
	if rev < barrier {
		return "", 0, 0, fmt.Errorf("the snapshot's revision %d is below %d, the revision of the linearizable read before it: it misses acknowledged writes", rev, barrier)
	}
	path := filepath.Join(dir, Name(start, rev))
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", 0, 0, fmt.Errorf("snapshots: %w", err)
	}
	return path, rev, size, syncDir(dir)
}

// estimate is the expected size of a snapshot: the newest one's (the
// closest: the database grows slowly, and the write itself stops at the
// floor if it grew), else the source's (the database file's size, which
// bbolt's preallocation makes larger than a copy).
func (s *Scheduler) estimate(ctx context.Context) int64 {
	if files, err := List(ctx, s.opts.Dir, false); err == nil && len(files) > 0 {
		return files[0].SizeBytes
	}
	if s.opts.Size != nil {
		if n, err := s.opts.Size(ctx); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// onIdleThread runs fn on an OS thread of its own at the idle I/O
// priority, and waits for it. The thread is not handed back to the Go
// scheduler: it exits with the goroutine (a locked goroutine that ends
// takes its thread with it), and its priority with it.
func onIdleThread(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No unlock: see above.
		_ = lowerIOPriority() // outside Linux, or refused: the pacing remains
		done <- fn()
	}()
	return <-done
}

// prune removes the snapshots beyond the newest Retention.
func (s *Scheduler) prune(ctx context.Context) error {
	files, err := List(ctx, s.opts.Dir, false)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files[min(len(files), s.opts.Retention):] {
		if err := os.Remove(filepath.Join(s.opts.Dir, f.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		s.log.Info("Removed an old snapshot", "file", f.Name, "retention", s.opts.Retention)
	}
	if err := syncDir(s.opts.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeLeftovers removes the temporary files of snapshots a crash cut
// short.
func (s *Scheduler) removeLeftovers() {
	left, _ := filepath.Glob(filepath.Join(s.opts.Dir, tempPattern))
	for _, p := range left {
		if err := os.Remove(p); err == nil {
			s.log.Info("Removed the temporary file of an unfinished snapshot", "file", p)
		}
	}
}

// Status reports the schedule, the last runs and the snapshots kept.
func (s *Scheduler) Status(ctx context.Context) clusterapi.Snapshots {
	st := clusterapi.Snapshots{Dir: s.opts.Dir, IntervalSeconds: int64(s.opts.Interval / time.Second),
		Retention: s.opts.Retention, MinFreeBytes: s.opts.MinFreeBytes, Runs: map[string]uint64{}}
	s.mu.Lock()
	if !s.next.IsZero() {
		next := s.next.UTC()
		st.Next = &next
	}
	if s.last != nil {
		last := *s.last
		st.Last = &last
	}
	if s.lastSuccess != nil {
		ok := *s.lastSuccess
		st.LastSuccess = &ok
	}
	for k, v := range s.runs {
		st.Runs[k] = v
	}
	s.mu.Unlock()
	files, err := List(ctx, s.opts.Dir, false)
	if err != nil {
		st.ListError = err.Error()
	}
	st.Files = files
	return st
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	if err := datadir.SyncDir(dir); err != nil {
		return fmt.Errorf("snapshots: %w", err)
	}
	return nil
}
