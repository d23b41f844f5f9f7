package snapshots

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// nameTime is the time layout of a snapshot's name: UTC, to the second,
// sortable as text.
const nameTime = "20060102T150405Z"

// tempPattern names a snapshot being written (os.CreateTemp's pattern):
// hidden, and never matching a snapshot's name.
const tempPattern = ".leasehold-snapshot-*.tmp"

var namePattern = regexp.MustCompile(`^leasehold-([0-9]{8}T[0-9]{6}Z)-r([0-9]+)\.db$`)

// Name is the file name of a snapshot started at t with revision rev:
// leasehold-20261127T160000Z-r12345.db.
func Name(t time.Time, rev int64) string {
	return fmt.Sprintf("leasehold-%s-r%d.db", t.UTC().Format(nameTime), rev)
}

// ParseName reads the time and revision of a snapshot's file name; ok is
// false for any other name.
func ParseName(name string) (t time.Time, rev int64, ok bool) {
	m := namePattern.FindStringSubmatch(name)
	if m == nil {
		return time.Time{}, 0, false
	}
	t, err := time.Parse(nameTime, m[1])
	if err != nil {
		return time.Time{}, 0, false
	}
	rev, err = strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return time.Time{}, 0, false
	}
	return t, rev, true
}
