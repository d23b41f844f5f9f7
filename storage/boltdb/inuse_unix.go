//go:build unix

package boltdb

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// waitUnlocked waits, up to timeout, until no other process holds the
// database file's lock (bbolt takes an exclusive flock for as long as a
// store is open). checkFile reads the file's pages before bbolt locks it:
// read while another server writes them, a page in mid-write looks
// damaged, and the operator would be sent to restore a healthy database.
// So a file that stays locked is refused as in use, not as damaged. A
// missing file is not locked.
func waitUnlocked(path string, timeout time.Duration) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("boltdb: open %s: %w", path, err)
	}
	defer f.Close()
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil // a file system without flock: bbolt will say
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s is locked by another process, for %s: is another leasehold serving (or compacting) this data directory?", ErrInUse, path, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
