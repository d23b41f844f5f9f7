package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// createLease creates a Lease over plain HTTP.
func createLease(t *testing.T, base, ns, name, holder string) {
	t.Helper()
	h, _ := json.Marshal(holder)
	body := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `"},"spec":{"holderIdentity":` + string(h) +
		`,"leaseDurationSeconds":15,"leaseTransitions":3,"renewTime":"2030-01-02T03:04:05.000000Z"}}`
	resp, err := http.Post(base+"/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create lease %s/%s: %d", ns, name, resp.StatusCode)
	}
}

// TestE2EOpsHealthAndMetrics checks the named health checks and the
// /metrics content.
func TestE2EOpsHealthAndMetrics(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "--metrics-per-lease")
	code, _, body := httpGet(t, ts.URL+"/readyz?verbose")
	for _, c := range []string{"ping", "log", "storage", "plugins", "election-controller", "shutdown"} {
		if !strings.Contains(body, "[+]"+c+" ok\n") {
			t.Errorf("/readyz?verbose lacks check %q:\n%s", c, body)
		}
	}
	if code != 200 || !strings.HasSuffix(body, "readyz check passed\n") {
		t.Errorf("/readyz?verbose = %d %q", code, body)
	}
	if code, _, body := httpGet(t, ts.URL+"/livez?verbose"); code != 200 || strings.Contains(body, "storage") {
		t.Errorf("/livez?verbose = %d %q: livez must not depend on storage", code, body)
	}
	if code, _, body := httpGet(t, ts.URL+"/readyz/election-controller"); code != 200 || body != "ok" {
		t.Errorf("/readyz/election-controller = %d %q", code, body)
	}
	if code, _, _ := httpGet(t, ts.URL+"/healthz/no-such-check"); code != 404 {
		t.Errorf("/healthz/no-such-check = %d, want 404", code)
	}

	createLease(t, ts.URL, "edge", "uplink", `dev "7"`)
	code, ctype, m := httpGet(t, ts.URL+"/metrics")
	if code != 200 || !strings.HasPrefix(ctype, "text/plain; version=0.0.4") {
		t.Fatalf("/metrics = %d %q", code, ctype)
	}
	for _, want := range []string{
		`leasehold_lease_info{namespace="edge",lease="uplink",holder="dev \"7\""} 1`,
		`leasehold_lease_renew_timestamp_seconds{namespace="edge",lease="uplink"} 1.893553445e+09`,
		`leasehold_lease_expiry_timestamp_seconds{namespace="edge",lease="uplink"} 1.89355346e+09`,
		`leasehold_lease_transitions_total{namespace="edge",lease="uplink"} 3`,
		`leasehold_http_requests_total{verb="POST",group="coordination.k8s.io",version="v1",resource="leases",code="201"} 1`,
		`# TYPE leasehold_http_request_duration_seconds histogram`,
		`leasehold_storage_revision{backend="boltdb"} `,
		`leasehold_storage_db_size_bytes{backend="boltdb"} `,
		`leasehold_storage_quota_bytes{backend="boltdb"} 134217728`,
		`leasehold_storage_data_bytes{backend="boltdb"} `,
		`leasehold_storage_commit_duration_seconds_bucket{le="+Inf"} `,
		`leasehold_watch_streams 0`,
		`leasehold_election_decisions_total `,
		`leasehold_plugin_calls_total{plugin="OldestEmulationVersion",builtin="true"} `,
		`go_goroutines `,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^leasehold_storage_commit_duration_seconds_count 0$`).MatchString(m) {
		t.Error("the storage commit was not observed")
	}
}

// startChild starts the built binary as a server and returns its URL and
// what it writes to its standard error: the test's own output is no place
// for it (a second signal's "exiting immediately", which this file's
// shutdown test causes on purpose, read in CI's output as if a server of
// another test had been killed).
func startChild(t *testing.T, bin string, args ...string) (*exec.Cmd, string, *syncWriter) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json"}, args...)...)
	cmd.SysProcAttr = childSysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncWriter{w: new(bytes.Buffer)}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var line struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "Serving the Lease API" {
				urlc <- line.URL
			}
		}
	}()
	select {
	case u := <-urlc:
		return cmd, u, stderr
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not start within 30s; its standard error:\n%s", stderr.String())
	}
	return nil, "", nil
}

// openWatch starts a watch and returns its body once the headers arrived.
func openWatch(t *testing.T, url string) io.ReadCloser {
	t.Helper()
	resp, err := http.Get(url + "/apis/coordination.k8s.io/v1/leases?watch=true")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", resp, err)
	}
	return resp.Body
}

// waitExit waits for cmd and returns its exit code and how long it took.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), time.Since(start)
		}
		return 0, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("the server did not exit within %s", limit)
	}
	return -1, 0
}

// TestE2EOpsShutdown checks graceful shutdown of the real binary: with
// open watches SIGTERM ends the streams and exits 0 within a few seconds;
// during --shutdown-delay-duration /readyz fails while requests are still
// served; a second signal exits at once.
func TestE2EOpsShutdown(t *testing.T) {
	t.Parallel()
	bin := leaseholdBinary(t)

	cmd, url, _ := startChild(t, bin)
	var watches []io.ReadCloser
	for range 3 {
		watches = append(watches, openWatch(t, url))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, 10*time.Second)
	if code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM with 3 open watches: exit %d after %s, want 0 within 5s", code, took)
	}
	for i, w := range watches {
		if _, err := io.Copy(io.Discard, w); err != nil {
			t.Errorf("watch %d did not end cleanly: %v", i, err)
		}
		w.Close()
	}

	cmd, url, stderr := startChild(t, bin, "--shutdown-delay-duration", "20s")
	w := openWatch(t, url)
	defer w.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _, _ := httpGet(t, url+"/readyz")
		if code == 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after SIGTERM", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, _ := httpGet(t, url+"/livez"); code != 200 {
		t.Errorf("/livez during the shutdown delay = %d, want 200 (still serving)", code)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// At once: well before the 20 s delay the first SIGTERM started.
	if code, took := waitExit(t, cmd, 20*time.Second); code != 1 || took >= 10*time.Second {
		t.Errorf("second SIGTERM: exit %d after %s, want 1 at once (not after the 20s delay)", code, took)
	}
	if want := "leasehold: second signal (terminated), exiting immediately"; !strings.Contains(stderr.String(), want) {
		t.Errorf("second SIGTERM: the server did not say %q on its standard error:\n%s", want, stderr.String())
	}
}

// TestE2EOpsBackupRestore backs a running server up (through its backup
// endpoint, as the file is locked), restores the copy into a new data
// directory, serves it, and compacts it offline. It also runs the
// healthcheck command against running and stopped servers.
func TestE2EOpsBackupRestore(t *testing.T) {
	testneeds.Slow(t, "backs up, restores and restarts servers")
	t.Parallel()
	ts := startServer(t)
	createLease(t, ts.URL, "default", "keep-me", "device-1")
	addr := strings.TrimPrefix(ts.URL, "http://")
	if code, out, errOut := runCLI(t, "healthcheck", "--listen", addr, "--data-dir", ts.DataDir); code != 0 {
		t.Errorf("healthcheck on a ready server = %d %s %s", code, out, errOut)
	}

	backup := filepath.Join(t.TempDir(), "backup.db")
	code, out, errOut := runCLI(t, "backup", "--data-dir", ts.DataDir, backup)
	if code != 0 || !strings.Contains(out, "from the server at "+ts.URL) {
		t.Fatalf("backup of a running server = %d %q %s", code, out, errOut)
	}
	ts.Stop(t)
	if code, _, _ := runCLI(t, "healthcheck", "--listen", addr); code != 1 {
		t.Errorf("healthcheck on a stopped server = %d, want 1", code)
	}
	// Offline, the file is read directly.
	if code, out, errOut := runCLI(t, "backup", "--data-dir", ts.DataDir, backup+".offline"); code != 0 || !strings.Contains(out, "leasehold.db") {
		t.Errorf("offline backup = %d %q %s", code, out, errOut)
	}

	restored := t.TempDir()
	if code, out, errOut := runCLI(t, "restore", "--data-dir", restored, backup); code != 0 {
		t.Fatalf("restore = %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "compact", "--data-dir", restored); code != 0 {
		t.Fatalf("compact = %d %s", code, errOut)
	}
	junk := filepath.Join(t.TempDir(), "junk.db")
	_ = os.WriteFile(junk, []byte(strings.Repeat("not a database ", 1000)), 0o600)
	if code, _, errOut := runCLI(t, "restore", "--data-dir", restored, junk); code != 1 || !strings.Contains(errOut, "not a leasehold store") {
		t.Errorf("restore of junk = %d %s, want a format error", code, errOut)
	}

	ts2 := startServerIn(t, restored)
	code, _, body := httpGet(t, ts2.URL+"/apis/coordination.k8s.io/v1/namespaces/default/leases/keep-me")
	if code != 200 || !strings.Contains(body, `"holderIdentity":"device-1"`) {
		t.Errorf("restored lease = %d %s", code, body)
	}
	if code, _, errOut := runCLI(t, "restore", "--data-dir", restored, backup); code != 1 || !strings.Contains(errOut, "in use") {
		t.Errorf("restore under a running server = %d %s, want refused", code, errOut)
	}
}
