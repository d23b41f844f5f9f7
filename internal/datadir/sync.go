package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SyncDir makes the creations, renames and removals of entries in dir
// durable: a file renamed into place survives power loss only once its
// directory is synced too. File systems that cannot sync a directory
// (fs.ErrInvalid) have nothing to make durable, and succeed.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
