package flowcontrol

import (
	"os"
	"runtime"
)

// DefaultSpareProcs is how many Go processors (Ps) the server runs beyond
// the runtime's default (the CPUs it may use): --flowcontrol-spare-procs.
//
// Why: Go's scheduler has no priorities. A renewal's PUT blocks in the
// storage writer's two fdatasyncs per commit (bbolt syncs the pages, then
// the meta page) and gives up its P each time; back from the disk, the
// writer needs a P again, and then the handlers its commit answered need
// one. When bulk work (a watch's 10,000 initial events, a LIST's
// encoding) holds every P, each of those three waits lasts until a P
// reaches a scheduling point: a bulk goroutine yields only when the
// runtime preempts it, after up to 10 ms. A trace of the watch storm on
// 2 CPUs showed the writer waiting for a P after an fdatasync for up to
// 18 ms (p99), the woken handlers up to 21 ms, three times per commit,
// while the GETs, which never block in a syscall, kept a p99 near 1 ms.
// With two Ps more than CPUs, a goroutine back from the disk finds an idle
// P (the writer's wait after fdatasync: p99 1.7 ms; the handlers' 8 ms,
// same machine back to back), and its thread competes for a CPU under the
// kernel's scheduler, which runs a thread that slept ahead of threads
// that used their share, instead of queueing behind bulk work in Go's.
const DefaultSpareProcs = 2

// ReserveProcs sets GOMAXPROCS to the runtime's default plus spare, and
// returns the value in force. A GOMAXPROCS set in the environment is the
// operator's choice and is left alone, as is everything when spare is 0.
// It may be called again (tests build many servers): the count starts
// from the runtime's default each time, not from the previous call's.
func ReserveProcs(spare int) int {
	if spare <= 0 || os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	runtime.SetDefaultGOMAXPROCS()
	procs := runtime.GOMAXPROCS(0) + spare
	runtime.GOMAXPROCS(procs)
	return procs
}
