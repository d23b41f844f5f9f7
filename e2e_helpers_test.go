package main

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testServer is a leasehold server started in-process by the same code path
// as the binary, listening on a random loopback port with a fresh data dir.
type testServer struct {
	URL        string // http://127.0.0.1:port
	DataDir    string
	Kubeconfig string // written by the server for kubectl and client-go

	cancel context.CancelFunc
	done   chan int
	logMu  sync.Mutex
	log    bytes.Buffer
}

// startServer starts a server and stops it when the test ends. extraArgs are
// appended to "serve --listen 127.0.0.1:0 --data-dir <tmp>".
func startServer(t testing.TB, extraArgs ...string) *testServer {
	t.Helper()
	return startServerIn(t, t.TempDir(), extraArgs...)
}

// startServerIn is startServer on an existing data directory (restarts).
func startServerIn(t testing.TB, dataDir string, extraArgs ...string) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), cancel: cancel, done: make(chan int, 1)}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"}, extraArgs...)
	addrCh := make(chan string, 1)
	go func() {
		ts.done <- run(ctx, args, lockedWriter{ts}, lockedWriter{ts}, func(addr string) { addrCh <- addr })
	}()
	select {
	case addr := <-addrCh:
		ts.URL = "http://" + addr
	case code := <-ts.done:
		cancel()
		t.Fatalf("server exited with code %d before it was ready; log:\n%s", code, ts.Log())
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("server not ready after 20s; log:\n%s", ts.Log())
	}
	t.Cleanup(func() { ts.Stop(t) })
	return ts
}

// Stop shuts the server down and waits for it; safe to call twice.
func (ts *testServer) Stop(t testing.TB) {
	t.Helper()
	ts.cancel()
	select {
	case code, ok := <-ts.done:
		if ok {
			close(ts.done)
			if code != 0 {
				t.Errorf("server exited with code %d; log:\n%s", code, ts.Log())
			}
		}
	case <-time.After(15 * time.Second):
		t.Errorf("server did not stop within 15s")
	}
}

// Log returns what the server logged so far.
func (ts *testServer) Log() string {
	ts.logMu.Lock()
	defer ts.logMu.Unlock()
	return ts.log.String()
}

type lockedWriter struct{ ts *testServer }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.ts.logMu.Lock()
	defer w.ts.logMu.Unlock()
	return w.ts.log.Write(p)
}
