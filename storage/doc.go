// Package storage defines leasehold's persistence contract: an etcd-shaped,
// revisioned key-value store that knows nothing about Kubernetes objects.
//
// Every successful write advances one global, strictly increasing revision.
// Each key remembers the revision that created it and the revision that last
// modified it; writes are conditional on the latter (compare-and-swap), which
// is how the engine implements resourceVersion preconditions. Watches deliver
// every change after a given revision, in revision order, and a backend keeps
// a bounded history of changes so that watches and paginated lists can resume
// from a recent revision. Revisions older than the retained history are
// "compacted" and reported as [ErrCompacted].
//
// Beyond Interface, a backend declares what else it can do by implementing
// small optional interfaces that callers assert: StatsReporter, Elector
// (replicas sharing the store), Backuper (an online copy of the whole
// database) and MemoryReleaser (giving memory back while idle), so that no
// caller needs a backend's concrete type.
//
// The embedded backend lives in storage/boltdb; storage/storagetest holds the
// conformance suite that every backend must pass unchanged.
package storage
