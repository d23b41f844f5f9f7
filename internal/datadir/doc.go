// Package datadir is the layout of leasehold's data directory (--data-dir):
// every path under it comes from Layout, so that the server, its storage
// backends, the cluster member, the replica and the offline commands
// (backup, restore, compact, healthcheck) agree on where each file lives.
//
// The directory carries a format version in a small file (layout-version).
// A directory without one was written before the file existed: it is
// version 1, today's layout, and Open writes the file the first time it
// opens it. A newer binary opens an older directory by running the
// migrations from its version up to Version, each in turn; a directory
// newer than the binary is refused with an error that says so (ErrNewer),
// never guessed at.
//
// It is a leaf (standard library only), outside the four layers, so that
// storage, web's server and clients, and the composition root can all use
// it.
package datadir
