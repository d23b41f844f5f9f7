package web

import (
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// The join endpoint is public (a joiner has only the token), so it is
// what a scanner or a flood reaches first. Before a join's body is read it
// passes two token buckets, one per source and one for the server; what
// they turn away gets 429 with Retry-After, as flow control's 429s. Every
// refusal is logged through one throttle, at most once per source per
// minute with the count of those it suppressed, and only with fields that
// passed validation.
const (
	// joinSourceRate and joinSourceBurst bound one source: a join is two
	// requests (a nonce, then the join), so an honest joiner's retries
	// (one a second) fit, and a guesser gets one proof a second.
	joinSourceRate  = 2
	joinSourceBurst = 20
	// joinGlobalRate and joinGlobalBurst bound all sources together, so
	// that many addresses cannot multiply the per-source bound.
	joinGlobalRate  = 10
	joinGlobalBurst = 50
	// joinSources bounds the sources remembered; beyond it new sources
	// share one bucket.
	joinSources = 4096
	// joinNonceTTL is how long a nonce stays valid: a joiner uses it at
	// once, on the same connection.
	joinNonceTTL = 30 * time.Second
	// joinNoncesPending bounds the nonces remembered; the global rate
	// keeps honest use far below it (joinGlobalRate * joinNonceTTL +
	// joinGlobalBurst = 350).
	joinNoncesPending = 1024
)

// joinGuard is the join endpoint's state: its rate limits, the nonces it
// handed out and its log throttle.
type joinGuard struct {
	limits   *joinLimiter
	nonces   *clusterapi.Nonces
	failures failureThrottle
}

func newJoinGuard() *joinGuard {
	return &joinGuard{
		limits: newJoinLimiter(rateLimit{joinSourceRate, joinSourceBurst}, rateLimit{joinGlobalRate, joinGlobalBurst}, joinSources),
		nonces: clusterapi.NewNonces(joinNonceTTL, joinNoncesPending, nil),
	}
}

// isJoinPath reports the two paths of the join handshake, and the
// certificate renewal, public like them (clusterrotate.go).
func isJoinPath(p string) bool {
	return p == clusterapi.JoinPath || p == clusterapi.JoinNoncePath || p == clusterapi.RenewPath
}

// gateJoin runs before a join's body is read: the rate limits, then the
// body's announced size. It reports whether the request goes on; if not
// it has answered and logged.
func (s *Server) gateJoin(rc *fasthttp.RequestCtx) bool {
	source := joinSource(rc.RemoteIP())
	if ok, wait, scope := s.join.limits.allow(source, time.Now()); !ok {
		discardBody(rc, drainBytes)
		secs := int(math.Ceil(wait.Seconds()))
		key := source
		if scope == scopeGlobal {
			// Many sources past the server-wide limit share one line a
			// minute, however many addresses a flood comes from.
			key = scopeGlobal
		}
		s.logJoinRefusal(rc, key, "rate limited ("+scope+")", "")
		s.api.WriteError(rc, apierrors.NewTooManyRequests("Too many cluster join attempts ("+scope+"), please try again later.", max(secs, 1)))
		return false
	}
	if n := rc.Request.Header.ContentLength(); n > clusterapi.MaxJoinBodyBytes {
		discardBody(rc, drainBytes)
		s.joinRefused(rc, "body of "+strconv.Itoa(n)+" bytes", "")
		s.api.WriteError(rc, apierrors.NewRequestEntityTooLargeError("a join request is at most "+strconv.Itoa(clusterapi.MaxJoinBodyBytes)+" bytes"))
		return false
	}
	return true
}

// joinRefused logs a refused join, throttled per source; name is logged
// only once it is known valid ("" otherwise).
func (s *Server) joinRefused(rc *fasthttp.RequestCtx, reason, name string) {
	s.logJoinRefusal(rc, joinSource(rc.RemoteIP()), reason, name)
}

// logJoinRefusal is joinRefused throttled under key.
func (s *Server) logJoinRefusal(rc *fasthttp.RequestCtx, key, reason, name string) {
	log, suppressed := s.join.failures.allow(key, time.Now())
	if !log {
		return
	}
	attrs := []any{"remote", rc.RemoteIP().String(), "reason", reason}
	if name != "" {
		attrs = append(attrs, "member", name)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressedSinceLast", suppressed)
	}
	s.log.Warn("Refused a cluster join", attrs...)
}

// joinSource is the key the join's limits and log throttle count a
// client under: its address, or for IPv6 its /64, which one host usually
// holds whole.
func joinSource(ip net.IP) string {
	if ip.To4() == nil && len(ip) == net.IPv6len {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// rateLimit is a token bucket's refill rate (per second) and size.
type rateLimit struct {
	rate, burst float64
}

type bucket struct {
	tokens float64
	last   time.Time
}

// take takes a token if there is one; otherwise it says how long until
// there is.
func (b *bucket) take(l rateLimit, now time.Time) (bool, time.Duration) {
	if b.last.IsZero() {
		b.tokens = l.burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(l.burst, b.tokens+d.Seconds()*l.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// full reports whether the bucket has refilled by now: forgetting it
// changes nothing.
func (b *bucket) full(l rateLimit, now time.Time) bool {
	return b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst
}

// joinLimiter is the per-source and global token buckets of the join.
type joinLimiter struct {
	perSource, global rateLimit
	maxSources        int

	mu      sync.Mutex
	sources map[string]*bucket
	all     bucket
}

// The limits a join is refused by, as its Status and log line name them.
const (
	scopeSource = "per source"
	scopeGlobal = "server-wide"
)

// overflowSource is the bucket new sources share once maxSources are
// remembered and none of them can be forgotten.
const overflowSource = "(other sources)"

func newJoinLimiter(perSource, global rateLimit, maxSources int) *joinLimiter {
	return &joinLimiter{perSource: perSource, global: global, maxSources: maxSources, sources: map[string]*bucket{}}
}

// allow takes a token from source's bucket and the global one, or says
// which limit refused ("per source", "server-wide") and when to retry.
func (l *joinLimiter) allow(source string, now time.Time) (bool, time.Duration, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.sources[source]
	if b == nil {
		if len(l.sources) >= l.maxSources {
			for k, o := range l.sources {
				if o.full(l.perSource, now) {
					delete(l.sources, k)
				}
			}
		}
		if len(l.sources) >= l.maxSources {
			source = overflowSource
			b = l.sources[source]
		}
		if b == nil {
			b = &bucket{}
			l.sources[source] = b
		}
	}
	if ok, wait := b.take(l.perSource, now); !ok {
		return false, wait, scopeSource
	}
	if ok, wait := l.all.take(l.global, now); !ok {
		b.tokens++ // the source's token is not spent on a refused request
		return false, wait, scopeGlobal
	}
	return true, 0, ""
}

// remembered is how many sources have a bucket.
func (l *joinLimiter) remembered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sources)
}
