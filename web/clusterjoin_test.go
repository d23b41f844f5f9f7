package web

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// TestJoinLimiter: each source gets its burst, then a token per
// 1/rate with the wait said; all sources together get the global burst,
// a request refused server-wide costing its source nothing; and memory
// stays bounded however many sources there are.
func TestJoinLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newJoinLimiter(rateLimit{joinSourceRate, joinSourceBurst}, rateLimit{joinGlobalRate, joinGlobalBurst}, 100)
	for i := range joinSourceBurst {
		if ok, _, _ := l.allow("10.0.0.1", now); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait, scope := l.allow("10.0.0.1", now)
	if ok || scope != "per source" || wait != time.Second/joinSourceRate {
		t.Fatalf("past the burst: %v, wait %v, %q; want a refusal per source, wait %v", ok, wait, scope, time.Second/joinSourceRate)
	}
	if ok, _, _ := l.allow("10.0.0.2", now); !ok {
		t.Error("another source is refused while the first is limited")
	}
	now = now.Add(time.Second / joinSourceRate)
	if ok, _, _ := l.allow("10.0.0.1", now); !ok {
		t.Error("no token after waiting as told")
	}

	// The server-wide bucket: many sources at one instant.
	g := newJoinLimiter(rateLimit{joinSourceRate, joinSourceBurst}, rateLimit{joinGlobalRate, joinGlobalBurst}, 1000)
	allowed := 0
	for i := range 2 * joinGlobalBurst {
		ok, wait, scope := g.allow("10.1.0."+strconv.Itoa(i), now)
		if ok {
			allowed++
		} else if scope != "server-wide" || wait <= 0 {
			t.Fatalf("source %d refused %q, wait %v", i, scope, wait)
		}
	}
	if allowed != joinGlobalBurst {
		t.Errorf("%d of %d sources allowed at once, want the global burst %d", allowed, 2*joinGlobalBurst, joinGlobalBurst)
	}
	// A source refused server-wide kept its own tokens.
	now = now.Add(10 * time.Second)
	for i := range joinSourceBurst {
		if ok, _, scope := g.allow("10.1.0.99", now); !ok {
			t.Fatalf("request %d of a source refused server-wide before: %s", i+1, scope)
		}
	}

	// Memory: at most maxSources buckets and the shared one.
	for i := range 500 {
		l.allow("10.2."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250), now)
	}
	if n := l.remembered(); n > 101 {
		t.Errorf("%d sources remembered, bound 100 and the shared one", n)
	}
	// Idle sources make room for new ones, which get their own bucket.
	now = now.Add(time.Hour)
	for i := range 90 {
		l.allow("10.3.0."+strconv.Itoa(i), now)
	}
	if _, shared := l.sources[overflowSource]; shared && l.sources[overflowSource].last.Equal(now) {
		t.Error("new sources share a bucket while idle ones could make room")
	}
	if n := l.remembered(); n > 101 {
		t.Errorf("%d sources remembered, bound 100 and the shared one", n)
	}
}

// TestJoinSource: an IPv6 host, which usually holds a whole /64, counts as
// one source; IPv4 addresses count each.
func TestJoinSource(t *testing.T) {
	a, b := joinSource(net.ParseIP("2001:db8::1")), joinSource(net.ParseIP("2001:db8::ffff:2"))
	if a != b || a != "2001:db8::/64" {
		t.Errorf("one /64: %q and %q", a, b)
	}
	if joinSource(net.ParseIP("2001:db8:0:1::1")) == a {
		t.Error("another /64 counts as the same source")
	}
	if joinSource(net.ParseIP("10.0.0.1")) == joinSource(net.ParseIP("10.0.0.2")) || joinSource(net.ParseIP("10.0.0.1")) != "10.0.0.1" {
		t.Error("IPv4 addresses must count each")
	}
	if joinSource(net.ParseIP("::ffff:10.0.0.1")) != "10.0.0.1" {
		t.Error("an IPv4-mapped address counts as its IPv4 address")
	}
}
