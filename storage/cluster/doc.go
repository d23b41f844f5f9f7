// Package cluster owns the member lifecycle of leasehold's embedded etcd
// cluster ("leasehold serve --cluster-init", "--join", "--replica"), as
// k3s' pkg/etcd keeps join, naming, paths and its info handler together:
//
//   - provisioning (Provision): the cluster token, the member's name and
//     URLs, the cluster CA and the member's certificate, kept in the data
//     directory's cluster/ (datadir.Layout.Member) with a small state
//     file that lets a member restart with its data directory alone;
//   - joining (Join, JoinWithRetry): the joiner's half of the handshake;
//   - admitting (Membership): the member's half, with the cluster's
//     status and the removal of members, which web serves over HTTP;
//   - replicas (PrepareReplica): an API-only replica's client certificate
//     and the members' client URLs, kept in replica/;
//   - running the member (Start): etcd's own server
//     (go.etcd.io/etcd/server/v3/embed) with mutual TLS on the peer and
//     client listeners, and the self-promotion of a joining learner once
//     it caught up;
//   - trust (trust.go, gate.go, peergate.go): the certificates the joins
//     issued are recorded in etcd, and only those pass the member's client
//     port (a gRPC interceptor; a replica's within the key prefix only)
//     and its peer port (a TLS gate in front of etcd's loopback peer
//     listener); removing or revoking a device deletes its records and
//     rotates the cluster token in one raft write;
//   - a member's data: the import of a single-device database at
//     --cluster-init (Import, PrepareData), its backup (Snapshot,
//     CheckSnapshot) and its restore as a new cluster (StageRestore,
//     Restore), with etcd's own restore.
//
// The wire contract every side shares (join bodies and proofs, the status,
// the errors that pick HTTP codes) is the leaf clusterapi. The leases
// themselves are stored by storage/etcd over the member's own client URL;
// storage/backend opens the member's store and hands its Membership to the
// composition root, which gives it to web.
//
// A member whose disk fills up stops its process: etcd treats a failed
// write of its log or database as fatal (it never serves from a store it
// failed to write), and the member's log says so and what to do. The other
// members keep the quorum; once space is freed, the member restarts from
// its data directory and catches up.
package cluster
