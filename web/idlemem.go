package web

import (
	"context"
	"runtime/debug"
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
)

// releaseIdleMemory returns memory to the operating system once the
// server has gone quiet, and again every minute while it stays quiet. Go's
// background scavenger keeps free pages up to about the next GC goal, so
// after start-up (loading the store, the first lists) or a burst of load a
// quiet server kept tens of megabytes it no longer used. A release is one
// forced collection (the garbage is not known to be free before one), the
// storage backend's own release (Options.OnIdle) and the executable's
// mapped pages (releaseExecutablePages): a few milliseconds of CPU at a
// moment nobody waits for it. A busy server is never interrupted. (The
// engine's release, through Options.OnIdle, drops the decoded objects its
// watchers share: kept, they held a megabyte or two of an idle server.)
func (s *Server) releaseIdleMemory(ctx context.Context) {
	t := time.NewTicker(idleCheckInterval)
	defer t.Stop()
	last, quiet := s.requests.Load(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := s.requests.Load()
		busy := n-last > quietRequests
		last = n
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
