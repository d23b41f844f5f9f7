// Package backend opens the storage "leasehold serve" is configured with:
// its flags (--storage, --watch-history, the --etcd-* connection settings
// and the cluster's), Resolve, which decides once, from the flags and the
// data directory and without side effects, which storage runs (Mode:
// single device, external etcd, cluster member, replica), and Open, which
// starts it (provisioning a member or a replica through storage/cluster
// first) and returns it behind the one contract serve needs of it (Store).
//
// It is the only place that chooses between storage/boltdb, storage/etcd
// and storage/cluster, so that main assembles the server without knowing
// them.
package backend
