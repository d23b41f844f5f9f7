package cluster

import "go.etcd.io/etcd/server/v3/embed"

// etcd's defaults are sized for servers: its raft log keeps up to 15,000
// entries in each member's memory (a snapshot every 10,000 entries, and
// 5,000 more kept for followers that lag), which beside 200 KB writes
// would be 3 GB. A leasehold member keeps 3,000 at most: renewals (about
// 0.5 KB an entry) then hold about 1.5 MB, and large writes are paced in
// front of the store (Flags.LargeWriteBytesPerSec). A snapshot in etcd
// 3.6 holds the membership only (the data is bbolt's, already on disk),
// so taking one every 2,000 entries is cheap; a follower more than 1,000
// entries behind gets the database sent instead of the missing entries.
const (
	memberSnapshotCount          = 2000
	memberSnapshotCatchUpEntries = 1000
	// memberBackendBatchLimit is how many writes etcd's backend holds
	// before it commits them, if its one-second interval has not passed
	// first (embedConfig says why).
	memberBackendBatchLimit = 100
)

// sizeForDevice sets the embedded member's raft log bounds (see above)
// and its database quota from --storage-quota-bytes (quotaBackendBytes).
func sizeForDevice(ec *embed.Config, quotaBytes int64) {
	ec.SnapshotCount = memberSnapshotCount
	ec.SnapshotCatchUpEntries = memberSnapshotCatchUpEntries
	ec.QuotaBackendBytes = quotaBackendBytes(quotaBytes)
}
