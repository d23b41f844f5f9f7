package snapshots

import "golang.org/x/sys/unix"

// ioprio_set(2)'s constants (linux/ioprio.h).
const (
	ioprioWhoProcess = 1
	ioprioClassIdle  = 3
	ioprioClassShift = 13
)

// lowerIOPriority puts the calling OS thread in the idle I/O class: the
// block layer's schedulers that honour classes (BFQ, and CFQ before it)
// serve its reads and writes only when no other I/O waits, so the WAL's
// fsyncs and the database's commits go first. With mq-deadline or none it
// has no effect, and the pacing (Flags.BytesPerSec) is what protects
// them. The caller has locked its goroutine to the thread, and the thread
// ends with it (the priority dies with the thread).
func lowerIOPriority() error {
	_, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(unix.Gettid()), ioprioClassIdle<<ioprioClassShift)
	if errno != 0 {
		return errno
	}
	return nil
}

// ioPriority is the calling thread's I/O priority class, for tests.
func ioPriorityClass() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(unix.Gettid()), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r) >> ioprioClassShift, nil
}
