//go:build !unix

package snapshots

import "math"

// freeBytes cannot be read portably here: the floor is not enforced.
func freeBytes(string) (int64, error) { return math.MaxInt64, nil }
