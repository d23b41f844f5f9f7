package boltdb

import (
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// releaseMapped drops the pages of the mapped file from the process: the
// store serves reads from memory, so the mapping is touched again only by
// the pages a commit updates. Open calls it once load has read every key,
// ReleaseMemory whenever the server goes quiet. The pages stay in the page
// cache; they just stop counting as this process's resident memory (about
// the file's size: 17 MB for 10,000 leases). MADV_DONTNEED on a shared,
// read-only file mapping discards nothing. The read transaction holds
// bbolt's mapping lock, so a commit that grows the file cannot remap it
// meanwhile: the advice always lands on the database's own mapping, never
// on memory reused after a remap. tx.Size is the used part of the file,
// never more than the mapping.
func releaseMapped(db *bolt.DB) {
	_ = db.View(func(tx *bolt.Tx) error {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, db.Info().Data, uintptr(tx.Size()), syscall.MADV_DONTNEED)
		return nil
	})
}
