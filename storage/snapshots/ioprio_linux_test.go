package snapshots

import "testing"

// TestSnapshotOnIdleIOPriorityThread: the copy is written by a thread in
// the idle I/O class.
func TestSnapshotOnIdleIOPriorityThread(t *testing.T) {
	var class int
	err := onIdleThread(func() error {
		var err error
		class, err = ioPriorityClass()
		return err
	})
	if err != nil || class != ioprioClassIdle {
		t.Errorf("the snapshot thread's I/O class is %d (%v), want %d (idle)", class, err, ioprioClassIdle)
	}
	if c, _ := ioPriorityClass(); c == ioprioClassIdle {
		t.Errorf("the test's own thread is in the idle class too: the priority leaked")
	}
}
