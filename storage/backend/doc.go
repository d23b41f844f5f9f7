// Package backend opens the storage backend "leasehold serve" is
// configured with: its flags (--storage, --watch-history and the --etcd-*
// connection settings), their validation, and Open, which returns either
// backend behind the one contract serve needs of it (Store).
//
// It is the only place that chooses between storage/boltdb and
// storage/etcd, so that main assembles the server without knowing either.
package backend
