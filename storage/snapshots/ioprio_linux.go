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
//
// The thread's CPU niceness goes to 19 as well: checking the copy (its
// digest, bbolt's page check, every revision decoded) is CPU work, which
// on a small device would otherwise take turns with the raft loop and the
// renewals as an equal.
func lowerIOPriority() error {
	tid := unix.Gettid()
	_, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), ioprioClassIdle<<ioprioClassShift)
	if errno != 0 {
		return errno
	}
	return unix.Setpriority(unix.PRIO_PROCESS, tid, lowestNice)
}

// lowestNice is the lowest CPU priority a thread can have.
const lowestNice = 19

// ioPriority is the calling thread's I/O priority class, for tests.
func ioPriorityClass() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(unix.Gettid()), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r) >> ioprioClassShift, nil
}
