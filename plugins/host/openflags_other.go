//go:build !unix

package host

// Elsewhere there are no FIFOs to block on in the same way, and the
// pre-open Lstat refuses links.
const (
	openNonblock = 0
	openNoFollow = 0
)
