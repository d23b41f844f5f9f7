package web

import (
	"errors"
	"flag"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/web/flowcontrol"
)

// Fixed limits of the HTTP server.
const (
	// maxHeaderBytes bounds the request line plus headers (fasthttp's
	// read buffer); larger requests get 431.
	maxHeaderBytes = 16 << 10
	// readTimeout bounds reading one whole request, body included.
	readTimeout = 30 * time.Second
	// idleTimeout bounds the wait for the next request on a kept-alive
	// connection (kube-apiserver's, and net/http's default transport's).
	idleTimeout = 90 * time.Second
)

// Limits bound what clients may hold at once. Zero fields get the
// defaults in parentheses.
type Limits struct {
	// MaxRequestsInflight is the seats of concurrent requests other than
	// health checks (400, kube-apiserver's --max-requests-inflight),
	// divided among the request classes of flow control by
	// FlowControl.Shares; beyond a class's seats requests queue, and
	// beyond its queues they get 429 with Retry-After.
	MaxRequestsInflight int
	// FlowControl sets the classes' shares and queues and the LIST byte
	// budget (web/flowcontrol).
	FlowControl flowcontrol.Config
	// MaxWatchesPerClient caps the open watch streams of one client,
	// identified by user name and remote IP (100).
	MaxWatchesPerClient int
	// MaxWatchesPerUser caps the open watch streams of one user name
	// across all its addresses (1000), so that a user cannot multiply
	// MaxWatchesPerClient by the addresses it connects from. Without
	// authentication every client is the anonymous user: this is then
	// the server's cap.
	MaxWatchesPerUser int
	// WatchQueueBytes is the byte budget of one watch's undelivered
	// events, WatchQueueBytesTotal that of all watches together
	// (engine.DefaultWatchQueueBytes and DefaultWatchQueueBytesTotal): a
	// watch whose client falls behind beyond them is closed, and its
	// client re-watches.
	WatchQueueBytes, WatchQueueBytesTotal int
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
	fs.IntVar(&l.MaxRequestsInflight, "max-requests-inflight", 400, "seats of concurrent requests, divided among the request classes by --flowcontrol-shares; beyond a class's seats requests queue")
	l.FlowControl.RegisterFlags(fs)
	fs.IntVar(&l.MaxWatchesPerClient, "max-watches-per-client", 100, "open watch streams per user and remote IP before new ones get 429")
	fs.IntVar(&l.MaxWatchesPerUser, "max-watches-per-user", 1000, "open watch streams per user, across its addresses, before new ones get 429 (without authentication: of all clients)")
	fs.IntVar(&l.WatchQueueBytes, "watch-queue-bytes", engine.DefaultWatchQueueBytes, "undelivered event `bytes` one watch may hold before it is closed as too slow (its client re-watches)")
	fs.IntVar(&l.WatchQueueBytesTotal, "watch-queue-bytes-total", engine.DefaultWatchQueueBytesTotal, "undelivered event `bytes` all watches may hold together; a watch already behind is closed when it would pass this")
	fs.IntVar(&l.MaxConnections, "max-connections", 10000, "open connections before new ones are refused")
	fs.IntVar(&l.MaxBodyBytesInFlight, "max-request-body-bytes-inflight", DefaultMaxBodyBytesInFlight, "request body `bytes` held in memory at once across all requests before new bodies get 429")
}

// Validate checks limits given as flags: a zero would silently mean the
// default.
func (l Limits) Validate() error {
	if l.MaxRequestsInflight <= 0 || l.MaxWatchesPerClient <= 0 || l.MaxConnections <= 0 || l.MaxBodyBytesInFlight <= 0 {
		return errors.New("--max-requests-inflight, --max-watches-per-client, --max-connections and --max-request-body-bytes-inflight must be positive")
	}
	if l.MaxWatchesPerUser <= 0 || l.WatchQueueBytes <= 0 || l.WatchQueueBytesTotal <= 0 {
		return errors.New("--max-watches-per-user, --watch-queue-bytes and --watch-queue-bytes-total must be positive")
	}
	if l.WatchQueueBytes > l.WatchQueueBytesTotal {
		return errors.New("--watch-queue-bytes must not exceed --watch-queue-bytes-total")
	}
	return l.FlowControl.Validate()
}

type limiter struct {
	perClient  int
	perUser    int
	maxConns   int
	mu         sync.Mutex
	watchesFor map[string]int // by user@IP
	watchesOf  map[string]int // by user
}

func newLimiter(l Limits) *limiter {
	if l.MaxWatchesPerClient <= 0 {
		l.MaxWatchesPerClient = 100
	}
	if l.MaxWatchesPerUser <= 0 {
		l.MaxWatchesPerUser = 1000
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = 10000
	}
	return &limiter{
		perClient:  l.MaxWatchesPerClient,
		perUser:    l.MaxWatchesPerUser,
		maxConns:   l.MaxConnections,
		watchesFor: map[string]int{},
		watchesOf:  map[string]int{},
	}
}

// acquireWatch takes one of the watch slots of user at address ip
// without waiting: one of the client's (user and IP) and one of the
// user's. The returned func gives them back (once, however often it is
// called).
func (l *limiter) acquireWatch(user, ip string) (func(), bool) {
	client := user + "@" + ip
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watchesFor[client] >= l.perClient || l.watchesOf[user] >= l.perUser {
		return nil, false
	}
	l.watchesFor[client]++
	l.watchesOf[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.watchesFor[client]--; l.watchesFor[client] <= 0 {
				delete(l.watchesFor, client)
			}
			if l.watchesOf[user]--; l.watchesOf[user] <= 0 {
				delete(l.watchesOf, user)
			}
		})
	}, true
}

// tooManyRequests is maxinflight.go's tooManyRequests: plain text 429,
// for the watch limits.
func tooManyRequests(rc *fasthttp.RequestCtx) {
	rc.Response.Header.Set("Retry-After", "1")
	httpError(rc, "Too many requests, please try again later.", fasthttp.StatusTooManyRequests)
}
