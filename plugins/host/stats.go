package host

import (
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

const latencyWindow = 512 // recent decisions kept for p50/p99

// stats counts one module's decisions; safe for concurrent use.
type stats struct {
	mu          sync.Mutex
	calls       uint64
	errors      uint64
	lastErr     string
	lastErrAt   time.Time
	sum         time.Duration
	recent      []time.Duration // ring buffer
	next        int
	failing     bool
	failedCalls uint64 // in the current incident
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

// beginIncident counts a failure and reports whether it starts a new
// incident (the previous call succeeded), i.e. whether to log it.
func (s *stats) beginIncident() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failedCalls++
	if s.failing {
		return false
	}
	s.failing = true
	return true
}

// endIncident reports how many calls failed in the incident a success
// ends, or 0 when there was none.
func (s *stats) endIncident() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.failing {
		return 0
	}
	n := s.failedCalls
	s.failing, s.failedCalls = false, 0
	return n
}

func (s *stats) fill(st *abi.ModuleStatus) {
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
