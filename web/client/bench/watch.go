package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// watcher is one watch of the namespace's leases over a raw HTTP/1.1
// connection. It decodes the chunked framing and, per event line, only
// finds spec.renewTime: the lag is the time from that renewal being sent
// (renewTime is the sender's clock, on this machine) to the event
// arriving.
type watcher struct {
	conn   net.Conn
	br     *bufio.Reader
	line   []byte
	name   []byte       // `"name":"<prefix>`: events of other leases are ignored
	since  atomic.Int64 // UnixNano; events of renewals sent before it are not counted
	events atomic.Uint64
	lag    hist
	now    int64 // UnixNano when the data being fed was read
	err    atomic.Pointer[error]
}

// startWatch connects and waits for the response headers. local, when
// set, is the source address (spread over 127.0.0.0/8 so that the
// server's per-client watch limit sees distinct clients).
func startWatch(ctx context.Context, cfg *Config, rv string, local net.Addr, since time.Time) (*watcher, error) {
	d := net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", cfg.host())
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s?watch=1&resourceVersion=%s&timeoutSeconds=3600 HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\nUser-Agent: %s\r\n",
		cfg.leasesPath(), rv, cfg.host(), userAgent)
	if cfg.Token != "" {
		fmt.Fprintf(&req, "Authorization: Bearer %s\r\n", cfg.Token)
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		conn.Close()
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := &watcher{conn: conn, br: bufio.NewReaderSize(conn, 64<<10), name: []byte(`"name":"` + cfg.Prefix)}
	w.since.Store(since.UnixNano())
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := w.br.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("watch: %w", err)
	}
	chunked := false
	for {
		h, err := w.br.ReadString('\n')
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("watch: %w", err)
		}
		h = strings.TrimSpace(h)
		if h == "" {
			break
		}
		if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, "Transfer-Encoding") && strings.Contains(strings.ToLower(v), "chunked") {
			chunked = true
		}
	}
	if !strings.Contains(status, " 200 ") || !chunked {
		body, _ := w.br.Peek(w.br.Buffered())
		conn.Close()
		return nil, fmt.Errorf("watch: %s %s", strings.TrimSpace(status), bytes.TrimSpace(body))
	}
	_ = conn.SetReadDeadline(time.Time{})
	return w, nil
}

// run reads events until the connection closes.
func (w *watcher) run() {
	for {
		size, err := w.chunkSize()
		if err != nil {
			w.setErr(err)
			return
		}
		if size == 0 {
			w.setErr(errors.New("watch ended by the server"))
			return
		}
		for size > 0 {
			b, err := w.br.Peek(min(size, w.br.Size()))
			if err != nil && len(b) == 0 {
				w.setErr(err)
				return
			}
			w.now = time.Now().UnixNano() // one clock read per read, not per event
			w.feed(b)
			_, _ = w.br.Discard(len(b))
			size -= len(b)
		}
		if _, err := w.br.Discard(2); err != nil { // CRLF after the data
			w.setErr(err)
			return
		}
	}
}

func (w *watcher) setErr(err error) { w.err.CompareAndSwap(nil, &err) }

// failed returns the error that ended the watch, if any.
func (w *watcher) failed() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (w *watcher) chunkSize() (int, error) {
	line, err := w.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	line = bytes.TrimSpace(line)
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	n, err := strconv.ParseUint(string(line), 16, 31)
	if err != nil {
		return 0, fmt.Errorf("watch: bad chunk size %q", line)
	}
	return int(n), nil
}

// feed takes chunk data and handles every complete event line.
func (w *watcher) feed(b []byte) {
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			w.line = append(w.line, b...)
			return
		}
		ev := b[:nl]
		if len(w.line) > 0 {
			w.line = append(w.line, ev...)
			ev = w.line
		}
		w.event(ev)
		w.line = w.line[:0]
		b = b[nl+1:]
	}
}

func (w *watcher) event(ev []byte) {
	// Only renewals of the benchmark's leases: the election controller
	// also writes leases in the namespace when candidates churn.
	if !bytes.HasPrefix(ev, modifiedPrefix) || !bytes.Contains(ev[:min(len(ev), 256)], w.name) {
		return
	}
	at := lastRenewTime(ev)
	if at < 0 || len(ev) < at+27 {
		return
	}
	t, ok := parseMicroUTC(ev[at : at+27])
	if !ok || t < w.since.Load() {
		return
	}
	w.events.Add(1)
	w.lag.record(time.Duration(w.now - t))
}

// lastRenewTime returns the offset of spec.renewTime's value in a Lease
// event, or -1. spec comes last in a Lease, so it scans back from the end
// (managedFields, earlier, has "f:renewTime", which does not match): a
// forward search would walk the whole ~800-byte line.
func lastRenewTime(ev []byte) int {
	k := renewTimeKey
	for i := len(ev) - len(k); i >= 0; i-- {
		if ev[i] == '"' && ev[i+1] == k[1] && string(ev[i:i+len(k)]) == string(k) {
			return i + len(k)
		}
	}
	return -1
}

var modifiedPrefix = []byte(`{"type":"MODIFIED"`)

// parseMicroUTC parses "2006-01-02T15:04:05.000000Z" (metav1.MicroTime as
// the server writes it) into Unix nanoseconds, without time.Parse's
// generality: it runs once per event per watcher on the cores the server
// uses too.
func parseMicroUTC(b []byte) (int64, bool) {
	if len(b) != 27 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[26] != 'Z' {
		return 0, false
	}
	num := func(lo, hi int) (int, bool) {
		n := 0
		for _, c := range b[lo:hi] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	var v [7]int
	for i, r := range [7][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}, {20, 26}} {
		n, ok := num(r[0], r[1])
		if !ok {
			return 0, false
		}
		v[i] = n
	}
	return time.Date(v[0], time.Month(v[1]), v[2], v[3], v[4], v[5], v[6]*1000, time.UTC).UnixNano(), true
}

// localAddrs spreads watchers over loopback source addresses, 90 per
// address (the server allows 100 watches per client and address), when
// the server is on loopback; elsewhere the kernel picks.
func localAddr(cfg *Config, i int) net.Addr {
	host, _, err := net.SplitHostPort(cfg.host())
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() || ip.To4() == nil {
		return nil
	}
	return &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+i/90/250), byte(2+(i/90)%250))}
}
