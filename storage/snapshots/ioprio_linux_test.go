package snapshots

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestSnapshotOnIdleIOPriorityThread: the copy is written and checked by a
// thread in the idle I/O class, at nice 19.
func TestSnapshotOnIdleIOPriorityThread(t *testing.T) {
	var class, nice int
	err := onIdleThread(func() error {
		var err error
		if class, err = ioPriorityClass(); err != nil {
			return err
		}
		// getpriority(2)'s raw value is 20 - nice.
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		nice = 20 - prio
		return err
	})
	if err != nil || class != ioprioClassIdle || nice != lowestNice {
		t.Errorf("the snapshot thread's I/O class is %d and its nice %d (%v), want %d (idle) and %d", class, nice, err, ioprioClassIdle, lowestNice)
	}
	if c, _ := ioPriorityClass(); c == ioprioClassIdle {
		t.Errorf("the test's own thread is in the idle class too: the priority leaked")
	}
}
