package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/storage/etcd"
)

// TestExpiryProof: a lease is proved expired only by readings of 0 or less
// spanning a second, none further apart than reapMaxGap, in one term, of
// a lease granted reapMinTTL or more; any reading of 1 or more (a renewal)
// starts over.
func TestExpiryProof(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type reading struct {
		term           uint64
		sentMs, recvMs int
		ttl, granted   int64
		want           bool
	}
	cases := map[string][]reading{
		"zeros spanning a second": {
			{1, 0, 5, 1, 2, false}, {1, 50, 55, 0, 2, false}, {1, 500, 505, 0, 2, false},
			{1, 1000, 1005, 0, 2, false}, {1, 1055, 1060, 0, 2, true},
		},
		"a renewal in between starts over": {
			{1, 0, 5, 0, 2, false}, {1, 500, 505, 1, 2, false}, {1, 1010, 1015, 0, 2, false},
			{1, 1500, 1505, 0, 2, false}, {1, 2015, 2020, 0, 2, true},
		},
		"a gap of reapMaxGap starts over": {
			{1, 0, 5, 0, 2, false}, {1, 100, 1000, 0, 2, false}, {1, 1050, 1055, 0, 2, false},
			{1, 1500, 1505, 0, 2, false}, {1, 2000, 2005, 0, 2, false}, {1, 2060, 2065, 0, 2, true},
		},
		"a new term starts over": {
			{1, 0, 5, 0, 2, false}, {2, 500, 505, 0, 2, false}, {2, 1010, 1015, 0, 2, false},
			{2, 1505, 1510, 0, 2, true},
		},
		"a one-second lease is never proved expired": {
			{1, 0, 5, 0, 1, false}, {1, 500, 505, 0, 1, false}, {1, 1010, 1015, 0, 1, false}, {1, 1600, 1605, 0, 1, false},
		},
		"a lease gone reads negative": {
			{1, 0, 5, 0, 2, false}, {1, 600, 605, -1, 2, false}, {1, 1100, 1105, -1, 2, true},
		},
	}
	for name, rs := range cases {
		var p expiryProof
		for i, r := range rs {
			if got := p.observe(r.term, at(r.sentMs), at(r.recvMs), r.ttl, r.granted); got != r.want {
				t.Errorf("%s: reading %d (%+v): proved expired = %v, want %v", name, i, r, got, r.want)
			}
		}
	}
}

// TestReapElectionLeases on a real member that leads: the lease of an
// election's oldest key is never revoked while it is renewed, and is
// revoked once it expires, mostly by the member before etcd's own check
// every 500 ms comes (which revokes it otherwise).
func TestReapElectionLeases(t *testing.T) {
	m, _ := startMember(t, t.TempDir())
	ctx := context.Background()
	cli := m.local
	prefix := etcd.ElectionsPrefix(m.cfg.Prefix)
	const elections = 5
	type campaign struct {
		holder, newer clientv3.LeaseID
		key           string
	}
	var cs []campaign
	for i := range elections {
		var c campaign
		for j, id := range []*clientv3.LeaseID{&c.holder, &c.newer} {
			g, err := cli.Grant(ctx, 2)
			if err != nil {
				t.Fatalf("Grant: %v", err)
			}
			*id = g.ID
			key := fmt.Sprintf("%se%d/%x", prefix, i, int64(g.ID))
			if _, err := cli.Put(ctx, key, "x", clientv3.WithLease(g.ID)); err != nil {
				t.Fatalf("Put %s: %v", key, err)
			}
			if j == 0 {
				c.key = key
			}
		}
		cs = append(cs, c)
	}
	// A renewer keeps the leases in alive renewed every half second.
	var mu sync.Mutex
	alive := map[clientv3.LeaseID]bool{}
	for _, c := range cs {
		alive[c.holder], alive[c.newer] = true, true
	}
	renewErr := make(chan error, 1)
	stop := make(chan struct{})
	var renewer sync.WaitGroup
	renewer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			mu.Lock()
			ids := maps.Keys(alive)
			mu.Unlock()
			for id := range ids {
				if _, err := cli.KeepAliveOnce(ctx, id); err != nil {
					select {
					case renewErr <- fmt.Errorf("KeepAliveOnce(%x): %w", int64(id), err):
					default:
					}
				}
			}
		}
	})
	defer func() { close(stop); renewer.Wait() }()
	checkRenewed := func() {
		t.Helper()
		select {
		case err := <-renewErr:
			t.Fatalf("a lease renewed every half second (TTL 2 s) was revoked: %v (revoked by the member: %d)", err, m.reaped.Load())
		default:
		}
	}
	time.Sleep(4 * time.Second)
	checkRenewed()
	if n := m.reaped.Load(); n != 0 {
		t.Fatalf("the member revoked %d leases that were renewed every half second (TTL 2 s)", n)
	}
	// Then the holders' leases are left to expire, one election after
	// another, at different phases of etcd's check; the newer keys' are
	// renewed on (each becomes its election's holder).
	for i, c := range cs {
		if _, err := cli.KeepAliveOnce(ctx, c.holder); err != nil {
			t.Fatalf("KeepAliveOnce(%x): %v", int64(c.holder), err)
		}
		mu.Lock()
		delete(alive, c.holder)
		mu.Unlock()
		renewed := time.Now()
		deadline := renewed.Add(20 * time.Second)
		for {
			resp, err := cli.Get(ctx, c.key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if len(resp.Kvs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the holder's key %s still exists 20 s after its lease (TTL 2 s) was last renewed", c.key)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("election %d: the holder's key was deleted %v after its last renewal (TTL 2 s); revoked by the member so far: %d",
			i, time.Since(renewed).Round(time.Millisecond), m.reaped.Load())
		checkRenewed()
		time.Sleep(time.Duration(i) * 110 * time.Millisecond)
	}
	checkRenewed()
	if n := m.reaped.Load(); n == 0 || n > elections {
		t.Errorf("the member revoked %d of the %d expired holders' leases: want at least one (it reads them every %v, etcd every 500 ms), and none renewed", n, elections, reapEvery)
	}
}

// TestHolderStopsBeforeReapedSuccessorLeads: a holder of an election whose
// connection to the member stalls (as its server died, or was cut off)
// gives up leadership before the member revokes its expired lease and a
// successor leads: never two leaders at once. Both are real stores on a
// real member; the holder reaches it through a proxy that stops
// forwarding.
func TestHolderStopsBeforeReapedSuccessorLeads(t *testing.T) {
	m, cfg := startMember(t, t.TempDir())
	tlsCfg, err := etcd.TLSConfig(cfg.Paths.CAFile, cfg.Paths.CertFile, cfg.Paths.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	target := strings.TrimPrefix(m.ClientURL(), "https://")
	proxy := newStallingProxy(t, target)
	open := func(url, id string) *etcd.Store {
		s, err := etcd.Open(context.Background(), etcd.Options{
			Endpoints: []string{url}, Prefix: m.cfg.Prefix, TLS: tlsCfg, CompactInterval: -1,
			ElectionTTL: 2 * time.Second, Identity: id, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatalf("Open %s: %v", url, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open("https://"+proxy.addr(), "a"), open(m.ClientURL(), "b")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lostA, err := a.Campaign(ctx, "ctrl")
	if err != nil {
		t.Fatalf("a's campaign: %v", err)
	}
	bLeads := make(chan time.Time, 1)
	go func() {
		if _, err := b.Campaign(ctx, "ctrl"); err == nil {
			bLeads <- time.Now()
		}
	}()
	aStopped := make(chan time.Time, 1)
	go func() {
		<-lostA
		aStopped <- time.Now()
	}()
	select {
	case at := <-bLeads:
		t.Fatalf("b leads (at %v) while a does", at)
	case <-time.After(time.Second):
	}
	stalled := time.Now()
	proxy.stall()
	var stopped, led time.Time
	select {
	case led = <-bLeads:
		select {
		case stopped = <-aStopped:
		default:
			t.Fatalf("b leads %v after a's connection stalled, while a has not given up its leadership", led.Sub(stalled))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("b does not lead 30 s after a's connection stalled (TTL 2 s)")
	}
	if !stopped.Before(led) {
		t.Fatalf("a gave up its leadership %v after the stall, b led %v after it: two leaders at once", stopped.Sub(stalled), led.Sub(stalled))
	}
	t.Logf("a's connection stalled: a gave up after %v, b led after %v (leases the member revoked at expiry: %d)",
		stopped.Sub(stalled).Round(time.Millisecond), led.Sub(stalled).Round(time.Millisecond), m.reaped.Load())
}

// stallingProxy forwards TCP connections to target until stall, after
// which it keeps them open and forwards nothing (a peer gone silent).
type stallingProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{ln: ln, target: target}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			go p.pipe(u, c)
			go p.pipe(c, u)
		}
	}()
	return p
}

func (p *stallingProxy) addr() string { return p.ln.Addr().String() }

func (p *stallingProxy) stall() { p.stalled.Store(true) }

// pipe copies src to dst until the proxy stalls; then it holds both open.
func (p *stallingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.stalled.Load() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}
