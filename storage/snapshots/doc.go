// Package snapshots takes scheduled snapshots of a server's database
// (--snapshot-interval), on a cluster member and on a single device alike,
// through the same copy "leasehold backup" makes (storage.Backuper), and
// keeps the newest --snapshot-retention of them in a directory
// (<data-dir>/snapshots unless --snapshot-dir says otherwise).
//
// Each snapshot is, as a backup is:
//   - linearizable on a member: it starts with the member's barrier read
//     through the raft leader (cluster.Member.Barrier), and a snapshot
//     whose revision is below that read's is refused, so it holds every
//     write the cluster acknowledged before it began;
//   - checked before it gets its name: an etcd snapshot's digest, bbolt's
//     page-level check and every stored revision (cluster.CheckSnapshot),
//     or a single device's format marker and records;
//   - atomic: written to a temporary file, fsynced, renamed to its name
//     (leasehold-20261127T160000Z-r12345.db: the UTC time it was started
//     and its revision), and the directory fsynced. A crash leaves a
//     temporary file, removed at the next start, never a named one cut
//     short.
//
// It never fills the disk: a snapshot is refused when the file system's
// free space after it would fall below --snapshot-min-free-bytes, and
// abandoned if the free space falls below it while it is written; the
// refusal is logged, counted (leasehold_snapshot_runs_total{result=
// "refused_low_space"}) and shown in the UI and "leasehold backup list".
//
// It stays out of the way of the raft heartbeats and the renewals: the
// copy is written (and checked) by one OS thread of its own whose I/O
// priority is the idle class on Linux (ioprio_set) and whose CPU
// niceness is 19, paced to
// --snapshot-bytes-per-sec, and flushed to the disk every few MiB rather
// than in one large fsync at the end, which would queue the WAL's fsyncs
// behind it.
//
// The snapshot files are the formats "leasehold restore" takes: an etcd
// snapshot on a member (restore stages a new cluster from it), a bbolt
// file on a single device.
package snapshots
