package web

import (
	"context"
	"runtime/debug"
	"time"
)

// idleCheckInterval is how often releaseIdleMemory looks at the request
// count: a server that answered nothing for a whole interval is idle.
const idleCheckInterval = 3 * time.Second

// releaseIdleMemory returns free heap to the operating system once the
// server has gone idle. Go's background scavenger keeps free pages up to
// about the next GC goal, so after start-up (loading the store, the first
// lists) or a burst of load an idle server kept tens of megabytes it no
// longer used. One forced collection after the traffic stops (the
// garbage is not known to be free before a collection) costs a few
// milliseconds of CPU at a moment nobody waits for it; a busy server is
// never interrupted.
func (s *Server) releaseIdleMemory(ctx context.Context) {
	t := time.NewTicker(idleCheckInterval)
	defer t.Stop()
	last, released := s.requests.Load(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := s.requests.Load()
		if n != last {
			last, released = n, false
			continue
		}
		if released {
			continue
		}
		released = true
		debug.FreeOSMemory()
	}
}
