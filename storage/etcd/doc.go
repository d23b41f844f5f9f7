// Package etcd is leasehold's shared storage backend: the storage.Interface
// contract on an etcd v3 cluster, so that several stateless leasehold
// replicas serve one consistent set of objects, as kube-apiserver replicas
// do on their etcd.
//
// # Mapping
//
// Every key is stored under Options.Prefix (default "/leasehold"), so that
// several installations can share one cluster; the backend's own keys live
// under Prefix+"/_leasehold/". Revisions are etcd's revisions, global to
// the cluster, so resourceVersions stay ordered across replicas (and jump
// when other installations write). Create is a transaction on
// CreateRevision == 0, Update and Delete compare ModRevision, and their
// else branch reads the key so that a failed compare tells ErrConflict
// from ErrNotFound in one round trip. Reads are linearizable (quorum)
// range requests: Get, List (at a revision for consistent pages, with
// etcd's Count and More) and CurrentRevision.
//
// # Watches
//
// A watch is an etcd watch from sinceRevision+1 with PrevKV and
// WithRequireLeader, one response per revision. The etcd client resumes a
// broken stream on another member by itself; a stream cancelled because
// its member lost the leader is resumed here from the last delivered
// revision. A compacted start revision, at Watch or later, is reported as
// ErrCompacted. RequestProgress maps to etcd's progress requests.
//
// # Compaction
//
// etcd keeps every revision until compacted. Like kube-apiserver, every
// replica runs a compactor that, once per CompactInterval, claims the turn
// through a compare-and-swap on one key and compacts to the revision seen
// one interval earlier. etcd does not report its compact revision;
// CompactRevision finds it as the oldest revision a read still accepts.
//
// # Elections
//
// Store implements storage.Elector with etcd's election recipe on a
// session lease of Options.ElectionTTL, so that the election controller
// runs on one replica at a time and moves within about one TTL when that
// replica dies.
package etcd
