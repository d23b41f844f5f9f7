//go:build !linux

package snapshots

import "errors"

// lowerIOPriority has no portable equivalent outside Linux: the pacing
// (Flags.BytesPerSec) protects the other writes there.
func lowerIOPriority() error { return errors.New("I/O priorities are Linux's") }

func ioPriorityClass() (int, error) { return 0, errors.New("I/O priorities are Linux's") }
