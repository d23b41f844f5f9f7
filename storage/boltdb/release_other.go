//go:build !linux

package boltdb

import bolt "go.etcd.io/bbolt"

// releaseMapped is a no-op where madvise is not available.
func releaseMapped(*bolt.DB) {}
