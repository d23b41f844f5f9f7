package web

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestDrainKeepsFreshDeadlines: a connection accepted just before the
// drain, whose goroutine then sets its own read deadline (fasthttp's
// ReadTimeout, as it does when it begins the first request), still has
// its read ended about freshConnGrace after the drain began, not at
// that later deadline: the drain gives the deadline again until it ends.
func TestDrainKeepsFreshDeadlines(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	defer server.Close()
	f := newFreshConns(readTimeout)
	f.connState(server, fasthttp.StateNew)
	stop := make(chan struct{})
	defer close(stop)
	began := time.Now()
	f.drain(stop)
	// fasthttp's goroutine, starting the first request after the drain.
	_ = server.SetReadDeadline(time.Now().Add(time.Hour))
	read := make(chan error, 1)
	go func() {
		_, err := server.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the fresh connection's read ended with %v, want its deadline", err)
		}
		t.Logf("the fresh connection's read ended %v after the drain began (grace %v)", time.Since(began).Round(time.Millisecond), freshConnGrace)
	case <-time.After(time.Minute):
		t.Fatal("the fresh connection's read was still waiting a minute after the drain began: its later deadline won")
	}

	// A connection whose first request arrived is left to its request.
	server2, client2 := net.Pipe()
	defer client2.Close()
	defer server2.Close()
	f.connState(server2, fasthttp.StateNew)
	f.arrived(server2)
	f.mu.Lock()
	_, tracked := f.conns[server2]
	f.mu.Unlock()
	if tracked {
		t.Error("a connection whose first request arrived is still tracked as fresh")
	}
}
