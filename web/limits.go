package web

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Fixed limits of the HTTP server.
const (
	// maxHeaderBytes bounds the request line plus headers (fasthttp's
	// read buffer); larger requests get 431.
	maxHeaderBytes = 16 << 10
	// readTimeout bounds reading one whole request, body included.
	readTimeout = 30 * time.Second
)

// Limits bound what clients may hold at once. Zero fields get the
// defaults in parentheses.
type Limits struct {
	// MaxRequestsInflight caps concurrent requests other than watches
	// and health checks (400, kube-apiserver's --max-requests-inflight);
	// beyond it requests get 429 with Retry-After, as upstream.
	MaxRequestsInflight int
	// MaxWatchesPerClient caps the open watch streams of one client,
	// identified by user name and remote IP (100).
	MaxWatchesPerClient int
	// MaxConnections caps open connections (10000); fasthttp answers
	// 503 beyond it.
	MaxConnections int
	// MaxBodyBytesInFlight caps the request body bytes held in memory at
	// once, across all requests (DefaultMaxBodyBytesInFlight); a request
	// whose body would exceed it gets 429 with Retry-After.
	MaxBodyBytesInFlight int
}

type limiter struct {
	inflight   chan struct{}
	perClient  int
	maxConns   int
	mu         sync.Mutex
	watchesFor map[string]int
}

func newLimiter(l Limits) *limiter {
	if l.MaxRequestsInflight <= 0 {
		l.MaxRequestsInflight = 400
	}
	if l.MaxWatchesPerClient <= 0 {
		l.MaxWatchesPerClient = 100
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = 10000
	}
	return &limiter{
		inflight:   make(chan struct{}, l.MaxRequestsInflight),
		perClient:  l.MaxWatchesPerClient,
		maxConns:   l.MaxConnections,
		watchesFor: map[string]int{},
	}
}

// acquire takes an in-flight slot without waiting.
func (l *limiter) acquire() bool {
	select {
	case l.inflight <- struct{}{}:
		return true
	default:
		return false
	}
}

func (l *limiter) release() { <-l.inflight }

// acquireWatch takes one of client's watch slots without waiting; the
// returned func gives it back (once, however often it is called).
func (l *limiter) acquireWatch(client string) (func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watchesFor[client] >= l.perClient {
		return nil, false
	}
	l.watchesFor[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.watchesFor[client]--; l.watchesFor[client] <= 0 {
				delete(l.watchesFor, client)
			}
		})
	}, true
}

// tooManyRequests is maxinflight.go's tooManyRequests: plain text 429.
func tooManyRequests(rc *fasthttp.RequestCtx) {
	rc.Response.Header.Set("Retry-After", "1")
	httpError(rc, "Too many requests, please try again later.", fasthttp.StatusTooManyRequests)
}
