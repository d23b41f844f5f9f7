package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/plugins/status"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/ui"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "rewrite docs/ui-*.png from the browser tests")

const chromiumPath = "/usr/bin/chromium"

// env is a real leasehold server (engine, bbolt, web) on loopback, wired
// to the UI sources the way main.go wires them.
type env struct {
	base string
	eng  *engine.Engine
	hist *history.Store
	stop func() // shuts the server down (idempotent)
	// dbPath is the database file; closeStore closes it (idempotent), so
	// a test can start another server on it.
	dbPath     string
	closeStore func()
	// token, when set, is sent as the bearer token by request.
	token string
}

// envOptions configures startEnvWith.
type envOptions struct {
	history int // caps the watch history (0: default)
	// dbPath reuses a database file (a restart); empty: a new one.
	dbPath   string
	auth     *auth.Authenticator
	policies auth.Policies
	// beforeServe runs on the history store before the server starts.
	beforeServe func(*history.Store)
}

// startEnv starts a server; history caps the watch history (0: default).
func startEnv(t *testing.T, history ...int) *env {
	t.Helper()
	var o envOptions
	if len(history) > 0 {
		o.history = history[0]
	}
	return startEnvWith(t, o)
}

func startEnvWith(t *testing.T, o envOptions) *env {
	t.Helper()
	opts := boltdb.Options{HistoryMaxEvents: o.history}
	dbPath := o.dbPath
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "leasehold.db")
	}
	st, err := boltdb.Open(context.Background(), dbPath, opts)
	if err != nil {
		t.Fatal(err)
	}
	closeStore := sync.OnceFunc(func() { st.Close() })
	t.Cleanup(closeStore)
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	hist := history.New(st, nil)
	if o.beforeServe != nil {
		o.beforeServe(hist)
	}
	srv, err := web.NewServer(web.Options{
		Engine: eng, Auth: o.auth, Policies: o.policies,
		Version: web.VersionInfo{Major: "1", Minor: "37", GitVersion: "v1.37.0+leasehold-0.1.0", GitCommit: "4f1c2d9e8b7a",
			GitTreeState: "clean", BuildDate: "2026-11-21T14:12:07Z", GoVersion: "go1.26.8", Platform: "linux/arm64"},
		UI: ui.Sources{
			// The storage conversion is the one main.go does: it compiles
			// only while the mirrored structs keep their fields.
			Storage: func(ctx context.Context) (engine.StorageStats, error) {
				s, err := st.Stats(ctx)
				return s, err
			},
			StoragePath: "/var/lib/leasehold/leasehold.db",
			Modules: func() []status.Module {
				return []status.Module{{
					Name: "oldest-emulation-version", File: "builtin:oldest", Version: "1.0.0", Builtin: true, Active: true,
					SHA256: "9f2b6c0d4e8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c", LoadedAt: time.Now().Add(-time.Hour),
					Calls: 42, Errors: 1, LastError: "deadline exceeded", LastErrorAt: time.Now().Add(-20 * time.Minute),
					LatencyP50: 92 * time.Microsecond, LatencyP99: 1400 * time.Microsecond,
					ABIVersion: "1", State: "loaded",
				}, {
					Name: "fastest-wins", File: "/etc/leasehold/plugins/fastest-wins.wasm", Version: "0.3.0", ABIVersion: "1",
					SignerKeyID: "edge-release-2026", State: "refused: signature does not verify with key edge-release-2026",
					RefusedSHA256: "5e1f0c3a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a2c4e6b8d0f",
				}}
			},
			Decisions: hist,
			Timelines: hist,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
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
	}
	t.Cleanup(stop)
	return &env{base: "http://" + ln.Addr().String(), eng: eng, hist: hist, stop: stop, dbPath: dbPath, closeStore: closeStore}
}

// request sends one API request and fails the test on an unexpected code.
func (e *env) request(t *testing.T, method, path string, body any, want int) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s (want %d)", method, path, resp.StatusCode, out, want)
	}
	return out
}

// lease is the spec of a test Lease.
type lease struct {
	ns, name, holder, preferred, strategy string
	duration                              int
	renewed                               time.Duration // renewTime is this long ago
	transitions                           int
}

func (e *env) createLease(t *testing.T, l lease) {
	t.Helper()
	spec := map[string]any{}
	if l.holder != "" {
		ts := time.Now().Add(-l.renewed).UTC().Format("2006-01-02T15:04:05.000000Z")
		spec["holderIdentity"], spec["renewTime"], spec["acquireTime"] = l.holder, ts, ts
	}
	if l.duration > 0 {
		spec["leaseDurationSeconds"] = l.duration
	}
	if l.preferred != "" {
		spec["preferredHolder"] = l.preferred
	}
	if l.strategy != "" {
		spec["strategy"] = l.strategy
	}
	if l.transitions > 0 {
		spec["leaseTransitions"] = l.transitions
	}
	e.request(t, "POST", "/apis/coordination.k8s.io/v1/namespaces/"+l.ns+"/leases", map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": l.name, "namespace": l.ns}, "spec": spec,
	}, http.StatusCreated)
}

func (e *env) createCandidate(t *testing.T, ns, name, leaseName, binary, emulation string, renewed time.Duration) {
	t.Helper()
	ts := time.Now().Add(-renewed).UTC().Format("2006-01-02T15:04:05.000000Z")
	e.request(t, "POST", "/apis/coordination.k8s.io/v1beta1/namespaces/"+ns+"/leasecandidates", map[string]any{
		"apiVersion": "coordination.k8s.io/v1beta1", "kind": "LeaseCandidate",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"leaseName": leaseName, "binaryVersion": binary, "emulationVersion": emulation,
			"strategy": "OldestEmulationVersion", "renewTime": ts, "pingTime": ts},
	}, http.StatusCreated)
}

// The browser is started once for the package and shared; every test
// opens its own tab on its own server (so its own origin and storage).
var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
	browserStop func()
)

// TestMain runs up to 3 tests at once unless -parallel says otherwise:
// each drives its own tab and server, and most of a test is waiting on the
// page (timers, live updates), which leaves the default of GOMAXPROCS
// parallel tests (2 on the CI machine) idle.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", "3"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if browserStop != nil {
		browserStop()
	}
	os.Exit(code)
}

// newTab opens a tab of the shared headless Chromium at the given viewport.
// A missing Chromium fails the test (it skips under -short): the browser
// tests are the only check of the UI, and a skip would let it rot silently.
func newTab(t *testing.T, width, height int64) context.Context {
	t.Helper()
	testneeds.Chromium(t)
	browserOnce.Do(func() {
		dir, err := os.MkdirTemp("", "leasehold-ui-chromium-")
		if err != nil {
			browserErr = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.Flag("hide-scrollbars", true), chromedp.UserDataDir(dir))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		browserCtx = bctx
		browserStop = func() { cancelBrowser(); cancelAlloc(); os.RemoveAll(dir) }
		// Start the browser now, so that its start-up is not charged to
		// the first test's timeouts.
		browserErr = chromedp.Do(bctx, chromedp.Navigate("about:blank"))
	})
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 25*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// consoleErrors collects the page's console errors and exceptions (a CSP
// violation is one) from now on.
func consoleErrors(ctx context.Context) func() []string {
	var mu sync.Mutex
	var errs []string
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %s (%s)", m.Type, m.Text, m.URL))
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the page. It goes through the
// DevTools protocol, which the page's CSP does not restrict (chromedp's
// Poll would: it compiles its predicate with new Function).
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a boolean expression until it holds and returns how long
// that took; it fails the test after timeout, showing what says why.
func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, expr, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](what))
			t.Fatalf("timed out after %v waiting for %s\npage: %s (err %v)", timeout, expr, state, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// text is the expression of an element's visible text ("" if missing).
func text(sel string) string {
	return fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? '')`, sel)
}

// screenshot writes docs/ui-<name>.png when -update-screenshots is given.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*updateScreenshots {
		return
	}
	// Let the transitions of the progress bars settle.
	time.Sleep(300 * time.Millisecond)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "ui-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// darkMode makes the page see prefers-color-scheme: dark.
func darkMode(t *testing.T, ctx context.Context, dark bool) {
	t.Helper()
	v := "light"
	if dark {
		v = "dark"
	}
	_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func noConsoleErrors(t *testing.T, errs func() []string) {
	t.Helper()
	if e := errs(); len(e) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(e, "\n"))
	}
}

// noConsoleErrorsBut is noConsoleErrors for a page that is expected to
// log failed requests to URLs containing expected (a browser logs every
// non-2xx response as an error).
func noConsoleErrorsBut(t *testing.T, errs func() []string, expected string) {
	t.Helper()
	var left []string
	for _, e := range errs() {
		if !strings.Contains(e, expected) {
			left = append(left, e)
		}
	}
	if len(left) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(left, "\n"))
	}
}
