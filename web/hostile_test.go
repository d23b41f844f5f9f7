package web_test

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/auth"
)

// rawExchange writes req as sent on one connection and returns the
// response and, when checkClose is set, whether the server closed the
// connection after it.
func rawExchange(t *testing.T, base, req string, checkClose ...bool) (*http.Response, string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", req, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(checkClose) == 0 {
		return resp, string(body), false
	}
	// A closed connection reads EOF at once; an open one times out. Every
	// caller wants it closed, so the wait is long enough for a loaded
	// machine's server to get round to closing it (300 ms was not always).
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	closed := err == io.EOF
	return resp, string(body), closed
}

// TestPathTricksNeverReachACollection: the reproducers of encoded slashes,
// dot segments and empty segments, which a path-normalizing router turned
// into a DELETE of the whole namespace.
func TestPathTricksNeverReachACollection(t *testing.T) {
	base := startServer(t, nil)
	coll := "/apis/coordination.k8s.io/v1/namespaces/victim/leases"
	for _, name := range []string{"a", "v1", "keep"} {
		if r := do(t, "POST", base+coll, `{"metadata":{"name":"`+name+`"}}`); r.code != 201 {
			t.Fatalf("create %s: %d %s", name, r.code, r.body)
		}
	}
	for _, p := range []string{
		coll + "/a%2F..", coll + "/a%2f..", coll + "/v1/..", coll + "/v1/%2e%2e", coll + "/v1/%2E%2E/",
		coll + "//", coll + "/./a", coll + "/a/.", "/apis/coordination.k8s.io/v1/namespaces/victim/leases/../leases",
		"/apis/coordination.k8s.io//v1/namespaces/victim/leases/a", coll + "/a%2Fstatus",
	} {
		for _, method := range []string{"DELETE", "GET", "PUT", "PATCH"} {
			resp, body, _ := rawExchange(t, base, method+" "+p+" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
			if resp.StatusCode != 404 {
				t.Errorf("%s %s: %d %s, want 404", method, p, resp.StatusCode, body)
			}
		}
	}
	r := do(t, "GET", base+coll, "")
	for _, name := range []string{`"name":"a"`, `"name":"v1"`, `"name":"keep"`} {
		if !strings.Contains(r.body, name) {
			t.Errorf("lease %s is gone: %s", name, r.body)
		}
	}
	// A plain single-object DELETE still works, and percent-encoded
	// characters that need no resolution are decoded as before.
	if r := do(t, "DELETE", base+coll+"/%6Beep", ""); r.code != 200 {
		t.Errorf("delete keep: %d %s", r.code, r.body)
	}
}

// TestConflictingFramingIsRefused: Content-Length with Transfer-Encoding
// gets 400 and the connection closes (RFC 9112 6.3), whichever comes first.
func TestConflictingFramingIsRefused(t *testing.T) {
	base := startServer(t, nil)
	for _, hdrs := range []string{
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
		"transfer-encoding: chunked\r\ncontent-length: 5\r\n",
	} {
		req := "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\n" + hdrs +
			"Content-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\nGET /version HTTP/1.1\r\nHost: x\r\n\r\n"
		resp, body, closed := rawExchange(t, base, req, true)
		if resp.StatusCode != 400 || !closed {
			t.Errorf("%q: %d %q closed=%v, want 400 and a closed connection", hdrs, resp.StatusCode, body, closed)
		}
	}
	// Chunked alone is fine.
	resp, body, _ := rawExchange(t, base, "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\n"+
		"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n1a\r\n{\"metadata\":{\"name\":\"ok\"}}\r\n0\r\n\r\n")
	if resp.StatusCode != 201 {
		t.Errorf("chunked create: %d %s", resp.StatusCode, body)
	}
}

func withToken(o *web.Options) {
	o.Auth = &auth.Authenticator{Tokens: auth.NewTokens([]auth.TokenEntry{{Token: "secret", User: auth.User{Name: "admin"}}})}
}

// TestBodyIsNotReadBeforeAuthentication: a request announcing a large body
// is answered 401 once its headers and first 8 KiB have arrived: the server
// neither waits for nor reserves the rest, and the connection closes.
func TestBodyIsNotReadBeforeAuthentication(t *testing.T) {
	base := startServer(t, withToken)
	start := time.Now()
	resp, _, closed := rawExchange(t, base, "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: application/json\r\nContent-Length: 6291456\r\n\r\n"+strings.Repeat(" ", 8<<10), true)
	if resp.StatusCode != 401 || !closed {
		t.Errorf("got %d closed=%v, want 401 and a closed connection", resp.StatusCode, closed)
	}
	// A server that waited for the body would answer only when its 30 s
	// read timeout (web's readTimeout) ended the request: rawExchange's
	// 10 s deadline fails that read, and no tighter bound is asserted (a
	// loaded machine may take seconds to answer).
	t.Logf("the 401 came after %v", time.Since(start).Round(time.Millisecond))
	// A small unauthenticated body is drained, and the connection serves
	// the next request.
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"+
		"GET /version HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n\r\n")
	br := bufio.NewReader(c)
	for _, want := range []int{401, 200} {
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("want %d: %v", want, err)
		}
		io.Copy(io.Discard, r.Body)
		if r.StatusCode != want {
			t.Errorf("got %d, want %d", r.StatusCode, want)
		}
	}
}

// TestBodyBudget: bodies held in memory at once are bounded across
// requests; beyond the budget a request gets 429 with Retry-After, and
// once the first request ends its bytes are free again.
func TestBodyBudget(t *testing.T) {
	const budget = 1 << 20
	base := startServer(t, func(o *web.Options) {
		o.Limits.MaxBodyBytesInFlight = budget
		// Enough workload seats for both large writes at once (each takes
		// a seat per flowcontrol.BodySeatBytes), so that the body budget, not flow control,
		// is what turns the second away.
		o.Limits.MaxRequestsInflight = 4000
	})
	size := budget/2 + 1
	body := `{"metadata":{"name":"big"}}` + strings.Repeat(" ", size) // whitespace is valid JSON
	head := "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"

	// The first request reserves its body and stalls half-way.
	slow, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, head+body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)

	resp, _, _ := rawExchange(t, base, head+body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second body: %d Retry-After=%q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// The first request completes; the budget is free again.
	if _, err := io.WriteString(slow, body[len(body)/2:]); err != nil {
		r, rerr := http.ReadResponse(bufio.NewReader(slow), nil)
		if rerr == nil {
			b, _ := io.ReadAll(r.Body)
			t.Fatalf("the slow request was answered early: %d %s", r.StatusCode, b)
		}
		t.Fatal(err)
	}
	slow.SetDeadline(time.Now().Add(10 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil || r.StatusCode != 201 {
		t.Fatalf("first body: %v %v", r, err)
	}
	body2 := strings.Replace(body, `"big"`, `"big2"`, 1)
	resp, text, _ := rawExchange(t, base, strings.Replace(head, "big", "big2", 1)+body2)
	if resp.StatusCode != 201 {
		t.Errorf("after the first ended: %d %s", resp.StatusCode, text)
	}
}

// TestOversizedBodies: a declared or chunked body over the limit gets
// kube-apiserver's 413 Status.
func TestOversizedBodies(t *testing.T) {
	base := startServer(t, func(o *web.Options) { o.MaxRequestBodyBytes = 1000 })
	path := "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	resp, body, _ := rawExchange(t, base, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1500\r\n\r\n"+strings.Repeat(" ", 1500))
	if resp.StatusCode != 413 || !strings.Contains(body, `"reason":"RequestEntityTooLarge"`) {
		t.Errorf("declared: %d %s", resp.StatusCode, body)
	}
	chunk := strings.Repeat(" ", 800)
	resp, body, closed := rawExchange(t, base, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"320\r\n"+chunk+"\r\n320\r\n"+chunk+"\r\n0\r\n\r\n")
	if resp.StatusCode != 413 || !strings.Contains(body, `"reason":"RequestEntityTooLarge"`) {
		t.Errorf("chunked: %d %s closed=%v", resp.StatusCode, body, closed)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnauthenticatedFloodIsLoggedOnce: a client failing authentication in
// a loop with a 4 KB User-Agent writes one short line, not one per request.
func TestUnauthenticatedFloodIsLoggedOnce(t *testing.T) {
	var logs syncBuffer
	base := startServer(t, func(o *web.Options) {
		withToken(o)
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ua := strings.Repeat("A", 4096)
	for i := 0; i < 300; i++ {
		if r := do(t, "GET", base+"/apis/coordination.k8s.io/v1/leases", "", "User-Agent: "+ua); r.code != 401 {
			t.Fatalf("request %d: %d", i, r.code)
		}
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "status=401") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d access lines for 300 failures, want 1:\n%s", len(lines), logs.String())
	}
	if len(lines[0]) > 1024 {
		t.Errorf("the line is %d bytes: attacker-controlled fields are not truncated", len(lines[0]))
	}
}

// TestOversizedHeadersGet431: a request line or headers beyond the 16 KiB
// read buffer get 431, as the README promises and net/http answers.
func TestOversizedHeadersGet431(t *testing.T) {
	base := startServer(t, nil)
	for name, req := range map[string]string{
		"a 20 KiB header": "GET /version HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 20<<10) + "\r\n\r\n",
		"5,000 headers":   "GET /version HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-A: b\r\n", 5000) + "\r\n",
		"a 100 KB URL":    "GET /version?" + strings.Repeat("a", 100<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		if resp, body, _ := rawExchange(t, base, req); resp.StatusCode != 431 {
			t.Errorf("%s: %d %q, want 431", name, resp.StatusCode, body)
		}
	}
}
