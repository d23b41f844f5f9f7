package web

import (
	"sync"
	"time"
)

// Failed authentications are what a scanner or a misconfigured client sends
// in a loop, each line carrying attacker-chosen fields. They are logged once
// per client address per authFailureInterval, the next line carrying how
// many were suppressed in between.
const (
	authFailureInterval = time.Minute
	// authFailureClients bounds the addresses remembered; beyond it all
	// further addresses share one entry, so memory stays bounded whatever
	// the number of clients.
	authFailureClients = 4096
	// overflowClient is that shared entry's key.
	overflowClient = "(other clients)"
)

// maxLoggedField bounds attacker-controlled strings (User-Agent, paths,
// names) in log lines.
const maxLoggedField = 256

type failureThrottle struct {
	mu      sync.Mutex
	clients map[string]*failureCount
}

type failureCount struct {
	since      time.Time // start of the current interval
	suppressed int
}

// allow reports whether a failure from client is logged now, and how many
// of its failures were suppressed since the last line.
func (f *failureThrottle) allow(client string, now time.Time) (bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clients == nil {
		f.clients = map[string]*failureCount{}
	}
	c := f.clients[client]
	if c == nil {
		if len(f.clients) >= authFailureClients {
			f.expire(now)
		}
		if len(f.clients) >= authFailureClients {
			client = overflowClient
			c = f.clients[client]
		}
		if c == nil {
			f.clients[client] = &failureCount{since: now}
			return true, 0
		}
	}
	if now.Sub(c.since) < authFailureInterval {
		c.suppressed++
		return false, 0
	}
	n := c.suppressed
	c.since, c.suppressed = now, 0
	return true, n
}

// expire forgets clients whose interval ended with nothing suppressed.
func (f *failureThrottle) expire(now time.Time) {
	for k, c := range f.clients {
		if now.Sub(c.since) >= authFailureInterval && c.suppressed == 0 {
			delete(f.clients, k)
		}
	}
}

// truncateField shortens an attacker-controlled string for a log line.
func truncateField(s string) string {
	if len(s) <= maxLoggedField {
		return s
	}
	return s[:maxLoggedField] + "...(truncated)"
}
