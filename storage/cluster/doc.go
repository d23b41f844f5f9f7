// Package cluster runs the etcd member embedded in "leasehold serve
// --cluster-init" and "--join" (etcd's own server, go.etcd.io/etcd/server/v3/embed):
// its start with mutual TLS on the peer and client listeners, the
// self-promotion of a joining learner once it caught up, the membership
// operations the join handshake and "leasehold cluster" need, and the small
// state file that lets a member restart with its data directory alone. It
// also takes and checks a member's snapshot (leasehold backup), and writes a
// new cluster's data from a snapshot (leasehold restore) or from another
// store's records (the import at --cluster-init), with etcd's own restore.
//
// The leases themselves are stored by storage/etcd over the member's own
// client URL; this package knows nothing of certificates' issuing or of
// HTTP (the composition root and web do that).
//
// A member whose disk fills up stops its process: etcd treats a failed
// write of its log or database as fatal (it never serves from a store it
// failed to write), and the member's log says so and what to do. The other
// members keep the quorum; once space is freed, the member restarts from
// its data directory and catches up.
package cluster
