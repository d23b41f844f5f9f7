package backend

import (
	"context"
	"log/slog"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/snapshots"
)

// NewSnapshots returns the scheduler of store's snapshots (--snapshot-*),
// or nil when the store has no copy of its own to take (a replica, or
// --storage etcd: the etcd cluster's operators snapshot it) or the
// schedule is off. A member's snapshots start with its barrier read.
func NewSnapshots(store Store, flags snapshots.Flags, dir datadir.Layout, log *slog.Logger) *snapshots.Scheduler {
	b, ok := store.(storage.Backuper)
	if !ok || flags.Interval <= 0 {
		return nil
	}
	if flags.Dir == "" {
		flags.Dir = dir.Snapshots()
	}
	src := snapshots.Source{Backup: b.Backup, Size: func(ctx context.Context) (int64, error) {
		st, err := store.Stats(ctx)
		return st.SizeBytes, err
	}}
	if bb, ok := store.(storage.BackupBarrier); ok {
		src.Barrier = bb.BackupBarrier
	}
	return snapshots.New(snapshots.Options{Flags: flags, Source: src, Logger: log})
}
