package web

import (
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// freshConnGrace is how long shutdown still waits for the first request
// of a connection that has sent nothing yet: long enough for a request
// already on its way, short beside the drain's grace.
const freshConnGrace = 300 * time.Millisecond

// freshConns tracks the connections that have not yet sent their first
// request, so that shutdown can end them. fasthttp's drain closes only
// connections idle between requests; one that is new (a browser opens
// spare connections ahead of its requests, Chromium's preconnect) counts
// as active while it waits for its first request, so it held the drain
// for the whole grace ("Shutdown did not complete in time", 5 s with a UI
// tab open). Only a connection's first request and its state changes
// take the lock, not every request.
type freshConns struct {
	mu sync.Mutex
	// conns maps each connection without a request yet to the read
	// deadline the drain gave it (zero before the drain).
	conns    map[net.Conn]time.Time
	draining bool
	// readTimeout is the server's, given back to a request that arrives
	// during the drain.
	readTimeout time.Duration
}

func newFreshConns(readTimeout time.Duration) *freshConns {
	return &freshConns{conns: map[net.Conn]time.Time{}, readTimeout: readTimeout}
}

// connState is fasthttp.Server.ConnState.
func (f *freshConns) connState(c net.Conn, state fasthttp.ConnState) {
	switch state {
	case fasthttp.StateNew:
		var deadline time.Time
		f.mu.Lock()
		if f.draining {
			deadline = time.Now().Add(freshConnGrace)
		}
		f.conns[c] = deadline
		f.mu.Unlock()
		if !deadline.IsZero() {
			_ = c.SetReadDeadline(deadline)
		}
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}
}

// wrap marks a connection's first request as arrived before next handles
// it; during a drain, it gives the request back the read time that
// drain took away (its body may still be streaming in).
func (f *freshConns) wrap(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		if rc.ConnRequestNum() == 1 {
			f.arrived(rc.Conn())
		}
		next(rc)
	}
}

func (f *freshConns) arrived(c net.Conn) {
	f.mu.Lock()
	_, fresh := f.conns[c]
	delete(f.conns, c)
	draining := f.draining
	f.mu.Unlock()
	if fresh && draining {
		_ = c.SetReadDeadline(time.Now().Add(f.readTimeout))
	}
}

// drain gives every connection without a request freshConnGrace to send
// one: past it, fasthttp's read fails and it closes the connection. It
// gives it again every freshConnRecheck until stop closes: fasthttp sets
// a connection's read deadline itself (its ReadTimeout) when the
// connection's goroutine begins its first request, which for one accepted
// just before the drain comes after it (a UI tab opens one as soon as the
// drain ends its watch): that connection then held the drain for its
// whole grace, once in a CI run.
func (f *freshConns) drain(stop <-chan struct{}) {
	f.mu.Lock()
	f.draining = true
	deadline := time.Now().Add(freshConnGrace)
	for c := range f.conns {
		f.conns[c] = deadline
	}
	f.mu.Unlock()
	f.applyDeadlines()
	go func() {
		tick := time.NewTicker(freshConnRecheck)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				f.applyDeadlines()
			}
		}
	}()
}

// freshConnRecheck is how often the drain gives fresh connections their
// deadline again.
const freshConnRecheck = 50 * time.Millisecond

// applyDeadlines sets every fresh connection's read deadline to the one
// the drain gave it.
func (f *freshConns) applyDeadlines() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c, deadline := range f.conns {
		_ = c.SetReadDeadline(deadline)
	}
}
