package boltdb

import (
	"fmt"
	"math"
	"os"
	"strconv"
)

// maxMappable32 is the largest file a 32-bit build can open: bbolt maps the
// whole file into the address space, and caps the mapping at 2 GiB there
// (its maxMapSize on 386 and arm), which the Go heap shares.
const maxMappable32 = math.MaxInt32

// checkMappable refuses, before bbolt maps it, a database file that this
// build's address space cannot hold, with the size and the remedy, rather
// than bbolt's bare "mmap too large" or an allocation failure later.
func checkMappable(path string) error {
	if strconv.IntSize != 32 {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil // a missing file is created; other errors surface in bolt.Open
	}
	if fi.Size() > maxMappable32 {
		return fmt.Errorf("%s is %d bytes, more than a 32-bit build can map (2 GiB): "+
			"open it with a 64-bit (amd64 or arm64) build, or compact it there with leasehold compact", path, fi.Size())
	}
	return nil
}
