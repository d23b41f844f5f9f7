package snapshots

import (
	"flag"
	"fmt"
	"time"
)

// Defaults of the snapshot flags. Scheduled snapshots are on by default:
// a device whose database file is damaged (an SD card after a power cut)
// or whose data an operator deleted by mistake has nothing to go back to
// otherwise, and a leasehold database is small (128 MiB at most by
// default) while the disk it lives on is not. Twice a day, the newest
// five kept, as k3s schedules its etcd snapshots.
const (
	DefaultInterval  = 12 * time.Hour
	DefaultRetention = 5
	// DefaultMinFreeBytes is the free space a snapshot must leave: room
	// for a member's database to grow to its quota (512 MiB with the
	// default --storage-quota-bytes), etcd's write-ahead log segments (64
	// MiB each) and the system's own logs. A disk too small for it gets
	// no scheduled snapshots, and says so, rather than a full disk that
	// stops the member.
	DefaultMinFreeBytes = 1 << 30
	// DefaultBytesPerSec paces the copy: a quarter of what a class 10 SD
	// card writes, so the WAL's fsyncs keep most of the card.
	DefaultBytesPerSec = 8 << 20
)

// Flags are the snapshot schedule's flags.
type Flags struct {
	// Interval is how often a snapshot is taken (0: never).
	Interval time.Duration
	// Retention is how many snapshots are kept, the newest.
	Retention int
	// Dir is where they are written ("": <data-dir>/snapshots).
	Dir string
	// MinFreeBytes is the free space a snapshot must leave on Dir's file
	// system.
	MinFreeBytes int64
	// BytesPerSec paces the copy (0: unpaced).
	BytesPerSec int64
}

// RegisterFlags adds the snapshot flags to fs.
func (f *Flags) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&f.Interval, "snapshot-interval", DefaultInterval, "how often the server writes a checked snapshot of its database to --snapshot-dir (a cluster member: after a linearizable read, so it holds every acknowledged write), named by time and revision; \"leasehold restore\" takes them (0: no scheduled snapshots)")
	fs.IntVar(&f.Retention, "snapshot-retention", DefaultRetention, "how many scheduled snapshots to keep: the newest, older ones are removed once a new one checks out")
	fs.StringVar(&f.Dir, "snapshot-dir", "", "`directory` of the scheduled snapshots (default <data-dir>/snapshots; another disk survives the loss of the data directory's)")
	fs.Int64Var(&f.MinFreeBytes, "snapshot-min-free-bytes", DefaultMinFreeBytes, "free `bytes` a scheduled snapshot must leave on --snapshot-dir's file system: one that would leave less is refused (logged, leasehold_snapshot_runs_total{result=\"refused_low_space\"}, the UI), so snapshots never fill the disk the database needs")
	fs.Int64Var(&f.BytesPerSec, "snapshot-bytes-per-sec", DefaultBytesPerSec, "most `bytes` per second a scheduled snapshot writes (it also runs at the idle I/O priority on Linux), so that the raft log's and the database's own writes keep the disk (0: unpaced)")
}

// Validate refuses flags that make no schedule.
func (f *Flags) Validate() error {
	switch {
	case f.Interval < 0:
		return fmt.Errorf("invalid --snapshot-interval %s: 0 (off) or positive", f.Interval)
	case f.Interval > 0 && f.Interval < time.Second:
		return fmt.Errorf("invalid --snapshot-interval %s: at least 1s (snapshots are named to the second)", f.Interval)
	case f.Retention < 1:
		return fmt.Errorf("invalid --snapshot-retention %d: keep at least 1 (turn snapshots off with --snapshot-interval 0)", f.Retention)
	case f.MinFreeBytes < 0:
		return fmt.Errorf("invalid --snapshot-min-free-bytes %d: 0 or more", f.MinFreeBytes)
	case f.BytesPerSec < 0:
		return fmt.Errorf("invalid --snapshot-bytes-per-sec %d: 0 (unpaced) or more", f.BytesPerSec)
	}
	return nil
}
