//go:build unix

package snapshots

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// freeBytes is the space of dir's file system that an unprivileged
// process may still write (bavail: the root-reserved blocks are not
// counted, as df does not).
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("snapshots: free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // field types differ by platform
}
