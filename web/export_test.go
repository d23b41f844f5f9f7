package web

import "time"

// SetConnTimeouts sets s's read and idle timeouts (30 s and 90 s) before
// Serve, so that a test of what a quiet connection gets need not wait them.
func SetConnTimeouts(s *Server, read, idle time.Duration) {
	s.readTimeout, s.idleTimeout = read, idle
}
