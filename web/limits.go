package web

import (
	"errors"
	"flag"
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

// RegisterFlags adds the limit flags of "leasehold serve" to fs, with
// the defaults above.
func (l *Limits) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&l.MaxRequestsInflight, "max-requests-inflight", 400, "concurrent non-watch requests before new ones get 429")
	fs.IntVar(&l.MaxWatchesPerClient, "max-watches-per-client", 100, "open watch streams per user and remote IP before new ones get 429")
	fs.IntVar(&l.MaxConnections, "max-connections", 10000, "open connections before new ones are refused")
	fs.IntVar(&l.MaxBodyBytesInFlight, "max-request-body-bytes-inflight", DefaultMaxBodyBytesInFlight, "request body `bytes` held in memory at once across all requests before new bodies get 429")
}

// Validate checks limits given as flags: a zero would silently mean the
// default.
func (l Limits) Validate() error {
	if l.MaxRequestsInflight <= 0 || l.MaxWatchesPerClient <= 0 || l.MaxConnections <= 0 || l.MaxBodyBytesInFlight <= 0 {
		return errors.New("--max-requests-inflight, --max-watches-per-client, --max-connections and --max-request-body-bytes-inflight must be positive")
	}
	return nil
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
