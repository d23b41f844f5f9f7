package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Noise modes: what a misbehaving neighbour does while the renewals run
// (--noise). Each is one way a dashboard, an operator script or a broken
// client has stalled leader election elsewhere.
const (
	// NoiseList: --noise-clients loops LIST every lease of
	// --noise-namespace, back to back.
	NoiseList = "list"
	// NoiseWatch: --noise-clients watchers of every namespace's leases
	// (so each renewal is fanned out to all of them), each re-listing
	// --noise-namespace and watching again every one to three seconds.
	NoiseWatch = "watch"
	// NoisePatch: --noise-clients loops merge-patching a lease of
	// --noise-namespace with an annotation of --noise-bytes bytes.
	NoisePatch = "patch"
	// NoiseIdle: --noise-clients connections that send one request and
	// then stay open, idle.
	NoiseIdle = "idle"
)

// NoiseResult counts what the noisy neighbour got done.
type NoiseResult struct {
	Mode    string `json:"mode"`
	Clients int    `json:"clients"`
	Objects int    `json:"objects"`
	// Ops are requests answered 2xx (for idle: connections open at the
	// end); Rejected those answered 429 (flow control turning it away).
	Ops        uint64  `json:"ops"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	Rejected   uint64  `json:"rejected"`
	Errors     uint64  `json:"errors"`
	Bytes      uint64  `json:"bytes"`
	FirstError string  `json:"first_error,omitempty"`
}

// noise runs the neighbour until stop.
type noise struct {
	cfg   *Config
	big   Config // the noise namespace as a Config, for paths and setup
	stop  chan struct{}
	wg    sync.WaitGroup
	ops   atomic.Uint64
	rej   atomic.Uint64
	errs  atomic.Uint64
	bytes atomic.Uint64
	first atomic.Pointer[string]
	conns []net.Conn
}

func (n *noise) fail(err error) {
	n.errs.Add(1)
	s := err.Error()
	n.first.CompareAndSwap(nil, &s)
}

// noiseConfig is cfg pointed at the noise namespace.
func noiseConfig(cfg *Config) Config {
	big := *cfg
	big.Namespace, big.Prefix, big.Leases, big.Clients = cfg.NoiseNamespace, "noise-", cfg.NoiseObjects, 1
	return big
}

// setupNoise creates the noise namespace's leases.
func setupNoise(ctx context.Context, cfg *Config, hc *fasthttp.HostClient) (int, error) {
	big := noiseConfig(cfg)
	return setup(ctx, &big, hc)
}

// startNoise starts the neighbour; stopNoise ends it and reports.
func startNoise(ctx context.Context, cfg *Config) (*noise, error) {
	n := &noise{cfg: cfg, big: noiseConfig(cfg), stop: make(chan struct{})}
	switch cfg.Noise {
	case NoiseList:
		hc := newClient(&n.big, cfg.NoiseClients)
		hc.ReadBufferSize = 64 << 10
		for range cfg.NoiseClients {
			n.wg.Go(func() { n.listLoop(hc) })
		}
	case NoiseWatch:
		for i := range cfg.NoiseClients {
			n.wg.Go(func() { n.watchLoop(ctx, i) })
		}
	case NoisePatch:
		hc := newClient(&n.big, cfg.NoiseClients)
		for i := range cfg.NoiseClients {
			n.wg.Go(func() { n.patchLoop(hc, i) })
		}
	case NoiseIdle:
		if err := n.openIdle(ctx); err != nil {
			for _, c := range n.conns {
				c.Close()
			}
			return nil, err
		}
	}
	return n, nil
}

func (n *noise) stopped() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// answer counts one response.
func (n *noise) answer(method, path string, code int, body []byte, err error) {
	switch {
	case err != nil:
		n.fail(err)
	case code == fasthttp.StatusTooManyRequests:
		n.rej.Add(1)
	case code/100 != 2:
		n.fail(statusError(method, path, code, body))
	default:
		n.ops.Add(1)
		n.bytes.Add(uint64(len(body)))
	}
}

// backoff sleeps after a 429 or an error, as a client that honours
// Retry-After would (shortened: the neighbour is meant to be noisy).
func (n *noise) backoff() {
	select {
	case <-n.stop:
	case <-time.After(100 * time.Millisecond):
	}
}

func (n *noise) listLoop(hc *fasthttp.HostClient) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	for !n.stopped() {
		n.listOnce(hc, req, resp)
	}
}

// listOnce lists the noise namespace's leases, counting the answer; after
// a refusal or an error it backs off and reports false.
func (n *noise) listOnce(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) bool {
	path := n.big.leasesPath()
	code, err := do(hc, &n.big, fasthttp.MethodGet, path, nil, req, resp)
	n.answer("GET", path, code, resp.Body(), err)
	if err != nil || code != fasthttp.StatusOK {
		n.backoff()
		return false
	}
	return true
}

// watchLoop re-lists the noise namespace and watches every namespace's
// leases for one to three seconds, over and over.
func (n *noise) watchLoop(ctx context.Context, i int) {
	hc := newClient(&n.big, 1)
	hc.ReadBufferSize = 64 << 10
	defer hc.CloseIdleConnections()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	for !n.stopped() {
		if !n.listOnce(hc, req, resp) {
			continue
		}
		secs := 1 + rand.IntN(3)
		if err := n.watchOnce(ctx, i, secs); err != nil && !n.stopped() {
			if strings.Contains(err.Error(), " 429 ") {
				n.rej.Add(1)
			} else {
				n.fail(err)
			}
			n.backoff()
		}
	}
}

// watchOnce watches all namespaces' leases from now for secs seconds
// (the server ends the stream), reading and discarding the events.
func (n *noise) watchOnce(ctx context.Context, i, secs int) error {
	d := net.Dialer{LocalAddr: localAddr(n.cfg, i), Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", n.cfg.host())
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer conn.Close()
	go func() {
		select {
		case <-n.stop:
			conn.Close()
		case <-time.After(time.Duration(secs+10) * time.Second):
		}
	}()
	var req strings.Builder
	fmt.Fprintf(&req, "GET /apis/coordination.k8s.io/v1/leases?watch=1&timeoutSeconds=%d HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\nUser-Agent: %s\r\nConnection: close\r\n",
		secs, n.cfg.host(), userAgent)
	if n.cfg.Token != "" {
		fmt.Fprintf(&req, "Authorization: Bearer %s\r\n", n.cfg.Token)
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	status, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if !strings.Contains(status, " 200 ") {
		return fmt.Errorf("watch: %s", strings.TrimSpace(status))
	}
	m, err := io.Copy(io.Discard, br)
	n.bytes.Add(uint64(m))
	if err != nil && !n.stopped() && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("watch: %w", err)
	}
	n.ops.Add(1)
	return nil
}

// patchLoop merge-patches lease i of the noise namespace (and the next
// ones, round-robin) with a large annotation.
func (n *noise) patchLoop(hc *fasthttp.HostClient, i int) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	value := strings.Repeat("x", n.cfg.NoiseBytes)
	for k := i; !n.stopped(); k += n.cfg.NoiseClients {
		path := n.big.leasesPath() + "/" + n.big.leaseName(k%n.cfg.NoiseObjects)
		body := fmt.Appendf(nil, `{"metadata":{"annotations":{"noise":"%d-%s"}}}`, k, value)
		req.Reset()
		resp.Reset()
		req.Header.SetMethod(fasthttp.MethodPatch)
		req.SetRequestURI(path)
		req.Header.SetHost(n.cfg.host())
		req.Header.Set("Accept", "application/json")
		req.Header.SetContentType("application/merge-patch+json")
		if n.cfg.Token != "" {
			req.Header.Set("Authorization", "Bearer "+n.cfg.Token)
		}
		req.SetBodyRaw(body)
		err := hc.Do(req, resp)
		code := resp.StatusCode()
		// A success carries the whole object back: count the request
		// only. A refusal's Status says why (a full storage quota, say).
		var answer []byte
		if code/100 != 2 {
			answer = resp.Body()
		}
		n.answer("PATCH", path, code, answer, err)
		if err != nil || code/100 != 2 {
			n.backoff()
		}
	}
}

// openIdle opens --noise-clients connections, each sending one GET of
// /version and then staying open without another request.
func (n *noise) openIdle(ctx context.Context) error {
	get := fmt.Sprintf("GET /version HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n", n.cfg.host(), userAgent)
	if n.cfg.Token != "" {
		get += "Authorization: Bearer " + n.cfg.Token + "\r\n"
	}
	get += "\r\n"
	buf := make([]byte, 4096)
	for i := range n.cfg.NoiseClients {
		d := net.Dialer{LocalAddr: localAddr(n.cfg, i), Timeout: 10 * time.Second}
		c, err := d.DialContext(ctx, "tcp", n.cfg.host())
		if err != nil {
			return fmt.Errorf("idle connection %d: %w", i, err)
		}
		n.conns = append(n.conns, c)
		if _, err := io.WriteString(c, get); err != nil {
			return fmt.Errorf("idle connection %d: %w", i, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, err := c.Read(buf) // the answer (small: one read)
		if err != nil {
			return fmt.Errorf("idle connection %d: %w", i, err)
		}
		n.bytes.Add(uint64(m))
	}
	return nil
}

// finish stops the neighbour and reports what it did over secs.
func (n *noise) finish(secs float64) *NoiseResult {
	close(n.stop)
	open := uint64(0)
	for _, c := range n.conns {
		// An idle connection still open answers nothing and is not at EOF.
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil && errors.Is(err, errTimeout(err)) {
			open++
		}
		c.Close()
	}
	n.wg.Wait()
	r := &NoiseResult{Mode: n.cfg.Noise, Clients: n.cfg.NoiseClients, Objects: n.cfg.NoiseObjects,
		Ops: n.ops.Load(), Rejected: n.rej.Load(), Errors: n.errs.Load(), Bytes: n.bytes.Load()}
	if n.cfg.Noise == NoiseIdle {
		r.Ops = open
	} else if secs > 0 {
		r.OpsPerSec = float64(r.Ops) / secs
	}
	if p := n.first.Load(); p != nil {
		r.FirstError = *p
	}
	return r
}

// errTimeout returns err when it is a timeout (the connection is alive
// and silent), else a sentinel that errors.Is never matches.
func errTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return errNotTimeout
}

var errNotTimeout = errors.New("not a timeout")
