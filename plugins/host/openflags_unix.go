//go:build unix

package host

import "syscall"

// Flags for reading the plugin directory: never block on a FIFO, never
// follow a final symbolic link unless asked.
const (
	openNonblock = syscall.O_NONBLOCK
	openNoFollow = syscall.O_NOFOLLOW
)
