package web

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// idleCheckInterval is how often releaseIdleMemory looks at the
	// request count.
	idleCheckInterval = 3 * time.Second
	// quietRequests is the most requests an interval may carry for the
	// server to count as quiet: 10 a second, the traffic of dozens of
	// leader elections renewing every two seconds, or hundreds of kubelets
	// every ten. A server with such steady light traffic is never idle in
	// the strict sense, and must not keep its start-up memory for that.
	quietRequests = 30
	// quietReleaseEvery repeats the release while the server stays quiet:
	// the history of a burst of writes expires minutes after the burst,
	// and the code that light traffic maps back is worth dropping again.
	quietReleaseEvery = 20 // intervals: a minute
	// quietGCPercent is the garbage collector's GOGC while the server is
	// quiet (idleGC).
	quietGCPercent = 20
	// quietAllocBytes is the most the process may allocate in an interval
	// for GOGC to stay lowered: 1 MB/s. An idle member allocates a few
	// hundred KB/s (raft heartbeats, the leadership probes); a follower
	// applying the writes another member takes gets no requests of its own
	// but allocates megabytes a second, and at a low GOGC would collect
	// five times as often.
	quietAllocBytes = 3 << 20
)

// idleGC lowers the garbage collector's GOGC while the server is quiet and
// puts it back once it is busy. At the default 100 the heap grows to twice
// what is live before each collection, and whatever an idle process still
// allocates (raft heartbeats, probes, timers) touches all of that again
// between two of the minute's releases: an idle cluster member, with about
// 23 MB live, sat at a 46 MB goal and 50 MB of anonymous memory. At 20 the
// goal is 1.2 times what is live. The cost is a collection five times as
// often, of an allocation rate that is small while quiet (a few hundred
// KB/s on a member, about nothing on a device); under load, where GC costs
// CPU per request, the setting is the one the process started with, from
// the end of the first busy interval (3 s) on. A GOGC already at or below
// quietGCPercent, or off, is left alone.
type idleGC struct {
	saved   int  // the GOGC to restore
	lowered bool // whether quiet() lowered it
}

// quiet lowers GOGC to quietGCPercent (see idleGC).
func (g *idleGC) quiet() {
	if g.lowered {
		return
	}
	prev := debug.SetGCPercent(quietGCPercent)
	if prev <= quietGCPercent { // off (negative), or already as low
		debug.SetGCPercent(prev)
		return
	}
	g.saved, g.lowered = prev, true
}

// busy restores the GOGC that quiet lowered.
func (g *idleGC) busy() {
	if g.lowered {
		debug.SetGCPercent(g.saved)
		g.lowered = false
	}
}

// releaseIdleMemory returns memory to the operating system once the
// server has gone quiet, and again every minute while it stays quiet. Go's
// background scavenger keeps free pages up to about the next GC goal, so
// after start-up (loading the store, the first lists) or a burst of load a
// quiet server kept tens of megabytes it no longer used. A release is one
// forced collection (the garbage is not known to be free before one), the
// storage backend's own release (Options.OnIdle) and the executable's
// mapped pages (releaseExecutablePages): a few milliseconds of CPU at a
// moment nobody waits for it. A busy server is never interrupted. While
// quiet and allocating little, the collector also runs at a lower GOGC
// (idleGC), so that what the release returned is not taken back by the
// next minute. (The
// engine's release, through Options.OnIdle, drops the decoded objects its
// watchers share: kept, they held a megabyte or two of an idle server.)
func (s *Server) releaseIdleMemory(ctx context.Context) {
	t := time.NewTicker(idleCheckInterval)
	defer t.Stop()
	var gc idleGC
	defer gc.busy()
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(allocs)
	last, lastAlloc, quiet := s.requests.Load(), allocs[0].Value.Uint64(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := s.requests.Load()
		busy := n-last > quietRequests
		last = n
		metrics.Read(allocs)
		allocated := allocs[0].Value.Uint64() - lastAlloc
		lastAlloc = allocs[0].Value.Uint64()
		if busy || allocated > quietAllocBytes {
			gc.busy()
		} else {
			gc.quiet()
		}
		if busy {
			quiet = 0
			continue
		}
		quiet++
		if quiet%quietReleaseEvery != 1 {
			continue
		}
		if s.onIdle != nil {
			s.onIdle()
		}
		debug.FreeOSMemory()
		releaseExecutablePages()
	}
}
