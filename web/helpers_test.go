package web_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
)

// testVersion is what the test servers report on /version.
var testVersion = web.VersionInfo{
	Major: "1", Minor: "37", EmulationMajor: "1", EmulationMinor: "37",
	MinCompatibilityMajor: "1", MinCompatibilityMinor: "36",
	GitVersion: "v1.37.1", GitCommit: "abc", GitTreeState: "clean",
	BuildDate: "2026-11-21T14:12:07Z", GoVersion: "go1.26.8", Compiler: "gc", Platform: "linux/amd64",
}

// newServer builds a Server on a real engine and bbolt store.
func newServer(t testing.TB, mod func(*web.Options)) *web.Server {
	t.Helper()
	return newServerStore(t, boltdb.Options{}, mod)
}

// newServerStore is newServer on a store opened with so.
func newServerStore(t testing.TB, so boltdb.Options, mod func(*web.Options)) *web.Server {
	t.Helper()
	st, err := boltdb.Open(context.Background(), filepath.Join(t.TempDir(), "db"), so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	opts := web.Options{Engine: eng, Version: testVersion}
	if mod != nil {
		mod(&opts)
	}
	srv, err := web.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// startServer serves on 127.0.0.1:0 and returns the base URL; the server
// shuts down at cleanup.
func startServer(t testing.TB, mod func(*web.Options)) string {
	t.Helper()
	return serveOn(t, newServer(t, mod))
}

// serveOn serves srv on 127.0.0.1:0 as startServer does.
func serveOn(t testing.TB, srv *web.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after shutdown")
		}
	})
	return "http://" + ln.Addr().String()
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   string
}

// do sends one request; hdr holds "Name: value" lines.
func do(t testing.TB, method, url, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// expect checks code and exact body.
func (r response) expect(t testing.TB, code int, body string) {
	t.Helper()
	if r.code != code || r.body != body {
		t.Errorf("got %d %q\nwant %d %q", r.code, r.body, code, body)
	}
}

// wireSample returns an expected response body from testdata/wire (see its
// README), without its final newline.
func wireSample(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wire", name))
	if err != nil {
		t.Fatalf("expected response %s: %v", name, err)
	}
	return string(bytes.TrimRight(b, "\n"))
}

// httpClientNoRedirect returns a client that reports redirects.
func httpClientNoRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
