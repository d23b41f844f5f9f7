package host

import (
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/plugins/status"
)

const latencyWindow = 512 // recent decisions kept for p50/p99

// stats counts one module's decisions for Modules (the UI and /metrics);
// safe for concurrent use. Failure incidents and backoff are the election
// controller's.
type stats struct {
	mu        sync.Mutex
	calls     uint64
	errors    uint64
	lastErr   string
	lastErrAt time.Time
	sum       time.Duration
	recent    []time.Duration // ring buffer
	next      int
}

func (s *stats) record(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.sum += d
	if len(s.recent) < latencyWindow {
		s.recent = append(s.recent, d)
	} else {
		s.recent[s.next] = d
		s.next = (s.next + 1) % latencyWindow
	}
	if err != nil {
		s.errors++
		s.lastErr, s.lastErrAt = err.Error(), time.Now()
	}
}

func (s *stats) fill(st *status.Module) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Calls, st.Errors, st.LatencySum = s.calls, s.errors, s.sum
	if s.lastErr != "" {
		st.LastError, st.LastErrorAt = s.lastErr, s.lastErrAt
	}
	if len(s.recent) > 0 {
		sorted := slices.Clone(s.recent)
		slices.Sort(sorted)
		st.LatencyP50 = sorted[(len(sorted)-1)*50/100]
		st.LatencyP99 = sorted[(len(sorted)-1)*99/100]
	}
}
