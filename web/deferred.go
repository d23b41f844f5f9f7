package web

import (
	"context"
	"time"
)

// The UI's lease watch is work readiness does not wait for, but its first
// list decodes every lease, as the election controller's (which readiness
// does wait for) does: started with the server, the two competed for the
// CPU, and a restart with 10,000 leases was ready that much later. So it
// starts once /readyz passes, polled every readyPoll, or after
// deferredStartMax at the latest: a check that fails for long (storage
// down, a clock waiting for NTP) must not leave the UI without holder
// histories. Until it has listed, the UI says the histories are not known
// yet, as it did during the list before.
const (
	readyPoll        = 5 * time.Millisecond
	deferredStartMax = 5 * time.Second
)

// waitReady returns once the readiness checks pass, after
// deferredStartMax, or when ctx is done.
func (s *Server) waitReady(ctx context.Context) {
	checks := s.checks("readyz")
	deadline := time.NewTimer(deferredStartMax)
	defer deadline.Stop()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if AllPass(checks)() == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}
