package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"

	"github.com/leasehold/leasehold/internal/testneeds"
)

func TestE2ECLIVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "version")
	want := regexp.MustCompile(`^leasehold ` + regexp.QuoteMeta(binaryVersion) + ` \(Kubernetes API v1\.37, go\S+ ` +
		runtime.GOOS + `/` + runtime.GOARCH + `\)\n$`)
	if code != 0 || !want.MatchString(out) || errOut != "" {
		t.Errorf("leasehold version: exit %d, stdout %q, stderr %q; want 0 and stdout matching %s", code, out, errOut, want)
	}
}

// TestE2ECLIServeHelp checks that --help lists every flag, each with its
// LEASEHOLD_ environment twin.
func TestE2ECLIServeHelp(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help exit %d, want 0; stderr %q", code, errOut)
	}
	help := out + errOut
	lines := strings.Split(help, "\n")
	flagLine := regexp.MustCompile(`^  --([a-z][a-z0-9-]*)\b`)
	seen := map[string]bool{}
	for i, line := range lines {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seen[m[1]] = true
		env := "LEASEHOLD_" + strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))
		rest := line
		if i+1 < len(lines) {
			rest += lines[i+1]
		}
		if !strings.Contains(rest, "(env "+env) {
			t.Errorf("flag --%s: help does not name its env twin %s:\n%s", m[1], env, rest)
		}
	}
	for _, f := range []string{"listen", "data-dir", "write-kubeconfig", "log-format", "log-level", "watch-history", "max-request-body-bytes"} {
		if !seen[f] {
			t.Errorf("serve --help does not list --%s; help:\n%s", f, help)
		}
	}
}

func TestE2ECLIBadUsage(t *testing.T) {
	// A bad flag prints the error and one line on where the help is, not
	// the whole help after it (which scrolled the error off the screen).
	for _, args := range [][]string{{"serve", "--bogus"}, {"--bogus"}, {"run", "--bogus", "--", "true"}, {"plugin", "vet", "--bogus", "x.wasm"}} {
		code, _, errOut := runCLI(t, args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != 2 || len(lines) != 2 || !strings.Contains(lines[0], "flag provided but not defined: -bogus") ||
			!strings.HasPrefix(lines[1], "Run 'leasehold ") || !strings.HasSuffix(lines[1], " --help' for usage.") {
			t.Errorf("leasehold %s: exit %d, stderr:\n%s\nwant exit 2 and two lines: the flag error, then \"Run 'leasehold ... --help' for usage.\"", strings.Join(args, " "), code, errOut)
		}
	}
	code, _, errOut := runCLI(t, "serve", "--bogus")
	if !strings.HasPrefix(errOut, "leasehold serve: ") || !strings.Contains(errOut, "Run 'leasehold serve --help' for usage.") {
		t.Errorf("serve --bogus: stderr %q, want the error prefixed by \"leasehold serve: \" and the hint naming serve", errOut)
	}
	code, _, errOut = runCLI(t, "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d stderr %q, want 2", code, errOut)
	}
	code, _, errOut = runCLI(t, "serve", "--log-format", "xml")
	if code != 2 || !strings.Contains(errOut, "--log-format") {
		t.Errorf("bad --log-format: exit %d stderr %q, want 2", code, errOut)
	}
	t.Setenv("LEASEHOLD_WATCH_HISTORY", "soon")
	code, _, errOut = runCLI(t, "serve")
	if code != 2 || !strings.Contains(errOut, "LEASEHOLD_WATCH_HISTORY") {
		t.Errorf("bad LEASEHOLD_WATCH_HISTORY: exit %d stderr %q, want 2 naming the variable", code, errOut)
	}
}

// serveInBackground runs "leasehold serve args..." and returns the address
// it listens on; the server stops when the test ends.
func serveInBackground(t *testing.T, args ...string) string {
	t.Helper()
	p, ready := spawnServer(t, args, nil)
	if !ready {
		t.Fatalf("server exited with %d; log:\n%s", p.code, p.log.String())
	}
	t.Cleanup(func() {
		code, ok := p.stop(15 * time.Second)
		switch {
		case !ok:
			t.Errorf("server did not stop within 15s of SIGTERM; server goroutines:\n%s", p.stacks())
		case code != 0:
			t.Errorf("server exit code %d; log:\n%s", code, p.log.String())
		}
	})
	return p.hostPort()
}

// TestE2ECLIEnvTwins checks that LEASEHOLD_* variables configure serve and
// that an explicit flag beats its variable.
func TestE2ECLIEnvTwins(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LEASEHOLD_DATA_DIR", dir)
	t.Setenv("LEASEHOLD_LISTEN", "127.0.0.1:0")
	t.Setenv("LEASEHOLD_WRITE_KUBECONFIG", filepath.Join(dir, "env.kubeconfig"))
	t.Setenv("LEASEHOLD_LOG_LEVEL", "warn")

	t.Run("env", func(t *testing.T) {
		addr := serveInBackground(t)
		if host, port, _ := net.SplitHostPort(addr); host != "127.0.0.1" || port == "0" {
			t.Errorf("listening on %q, want 127.0.0.1:<random>", addr)
		}
		if _, err := os.Stat(filepath.Join(dir, "leasehold.db")); err != nil {
			t.Errorf("LEASEHOLD_DATA_DIR not used: %v", err)
		}
		wantKubeconfig(t, filepath.Join(dir, "env.kubeconfig"), "http://"+addr)
	})

	t.Run("flag-beats-env", func(t *testing.T) {
		flagDir := t.TempDir()
		t.Setenv("LEASEHOLD_LISTEN", "127.0.0.1:1") // privileged port: must not be used
		os.Remove(filepath.Join(dir, "env.kubeconfig"))
		addr := serveInBackground(t, "--listen", "127.0.0.1:0", "--data-dir", flagDir,
			"--write-kubeconfig", filepath.Join(flagDir, "flag.kubeconfig"))
		if _, port, _ := net.SplitHostPort(addr); port == "1" || port == "0" {
			t.Errorf("listening on %q: --listen did not beat LEASEHOLD_LISTEN", addr)
		}
		wantKubeconfig(t, filepath.Join(flagDir, "flag.kubeconfig"), "http://"+addr)
		if _, err := os.Stat(filepath.Join(dir, "env.kubeconfig")); !os.IsNotExist(err) {
			t.Errorf("LEASEHOLD_WRITE_KUBECONFIG was used despite --write-kubeconfig (stat: %v)", err)
		}
		if _, err := os.Stat(filepath.Join(flagDir, "leasehold.db")); err != nil {
			t.Errorf("--data-dir did not beat LEASEHOLD_DATA_DIR: %v", err)
		}
	})
}

// wantKubeconfig checks a written kubeconfig: mode 0600, pointing at url.
func wantKubeconfig(t *testing.T, path, url string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Errorf("kubeconfig not written: %v", err)
		return
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig %s mode %v, want 0600 (it grants access to the API)", path, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "server: "+url+"\n") {
		t.Errorf("kubeconfig %s does not point at %s:\n%s", path, url, b)
	}
}

// TestE2EHealthAndVersion checks the probe endpoints and /version, raw and
// through client-go discovery.
func TestE2EHealthAndVersion(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	wantKubeconfig(t, ts.Kubeconfig, ts.URL)
	for _, p := range []string{"/readyz", "/livez", "/healthz"} {
		code, ctype, body := httpGet(t, ts.URL+p)
		if code != 200 || body != "ok" || !strings.HasPrefix(ctype, "text/plain") {
			t.Errorf("GET %s = %d %q %q, want 200 text/plain \"ok\"", p, code, ctype, body)
		}
	}

	code, ctype, body := httpGet(t, ts.URL+"/version")
	var v version.Info
	if err := json.Unmarshal([]byte(body), &v); err != nil || code != 200 || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("GET /version = %d %q %q (%v)", code, ctype, body, err)
	}
	if v.Major != "1" || v.Minor != "37" || v.EmulationMajor != "1" || v.EmulationMinor != "37" ||
		v.MinCompatibilityMajor != "1" || v.MinCompatibilityMinor != "36" ||
		!strings.HasPrefix(v.GitVersion, "v1.37.0+leasehold-") || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Compiler != "gc" {
		t.Errorf("/version = %+v", v)
	}
	if !strings.HasPrefix(body, "{\n  \"major\": \"1\",") {
		t.Errorf("/version is not indented like kube-apiserver's: %q", body)
	}

	dc, err := discovery.NewDiscoveryClientForConfig(restConfig(t, ts, wireJSON))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := dc.ServerVersion()
	if err != nil || sv.Major != "1" || sv.Minor != "37" {
		t.Errorf("discovery ServerVersion = %+v, %v", sv, err)
	}
}

func httpGet(t *testing.T, url string) (code int, ctype, body string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestE2ECLILogFormat checks that every component logs through the
// configured logger: with --log-format json each line is a JSON object,
// including the storage layer's "storage opened" line.
func TestE2ECLILogFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, ready := spawnServer(t, []string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--log-format", "json", "--log-level", "info"}, nil)
	if !ready {
		t.Fatalf("serve exited %d: %s", p.code, p.log.String())
	}
	if code, ok := p.stop(15 * time.Second); !ok || code != 0 {
		t.Errorf("serve exit %d (stopped: %v)", code, ok)
	}
	w := p.log
	msgs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(w.String()), "\n") {
		var rec struct {
			Level, Msg string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Level == "" {
			t.Errorf("log line is not slog JSON: %q", line)
			continue
		}
		msgs[rec.Msg] = true
	}
	for _, m := range []string{"storage opened", "Serving the Lease API"} {
		if !msgs[m] {
			t.Errorf("no JSON log record %q in the server's output (logged elsewhere or in another format?):\n%s", m, w.String())
		}
	}
}

// TestE2EServeStopsRightAfterStart stops the server the moment it reports
// ready, as a SIGTERM during startup does: it must still exit promptly.
func TestE2EServeStopsRightAfterStart(t *testing.T) {
	testneeds.Slow(t, "starts and stops a server 20 times")
	t.Parallel()
	for i := range 20 {
		dir := t.TempDir()
		p, ready := spawnServer(t, []string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "warn"}, nil)
		if !ready {
			t.Fatalf("attempt %d: exit %d before it was ready; log:\n%s", i, p.code, p.log.String())
		}
		code, ok := p.stop(5 * time.Second)
		if !ok {
			t.Fatalf("attempt %d: server stopped right after start did not exit within 5s; server goroutines:\n%s", i, p.stacks())
		}
		if code != 0 {
			t.Fatalf("attempt %d: exit %d; log:\n%s", i, code, p.log.String())
		}
	}
}

// TestE2ECLIEveryCommandHelp runs "--help" on every command "leasehold
// help" lists: each exits 0 and prints one style, "Usage: leasehold NAME"
// then double-dash flags (with an optional one-letter alias), each naming
// its environment twin.
func TestE2ECLIEveryCommandHelp(t *testing.T) {
	t.Parallel()
	code, list, errOut := runCLI(t, "help")
	if code != 0 || errOut != "" {
		t.Fatalf("leasehold help: exit %d, stderr %q", code, errOut)
	}
	names := map[string]bool{}
	entry := regexp.MustCompile(`^  leasehold (?:\[(serve)\]|([a-z]+))`)
	for _, line := range strings.Split(list, "\n") {
		if m := entry.FindStringSubmatch(line); m != nil {
			names[m[1]+m[2]] = true
		}
	}
	want := []string{"serve", "plugin", "run", "leader", "drain", "undrain", "kubeconfig", "healthcheck", "backup", "restore", "compact", "cluster", "bench", "version"}
	for _, name := range want {
		if !names[name] {
			t.Errorf("leasehold help does not list %q:\n%s", name, list)
		}
	}
	if len(names) != len(want) {
		t.Errorf("leasehold help lists %d commands, want %d (update this test with the table):\n%s", len(names), len(want), list)
	}
	flagLine := regexp.MustCompile(`^  (?:-[a-z], )?--([a-z][a-z0-9-]*)(?: \S+)?$`)
	singleDash := regexp.MustCompile(`^  -[a-z][a-z0-9-]+`) // -server: the flag package's own style
	for name := range names {
		code, out, errOut := runCLI(t, name, "--help")
		help := out + errOut
		if code != 0 {
			t.Errorf("%s --help: exit %d, want 0; output:\n%s", name, code, help)
			continue
		}
		if !strings.HasPrefix(help, "Usage: leasehold "+name) {
			t.Errorf("%s --help does not start with %q:\n%s", name, "Usage: leasehold "+name, help)
		}
		lines := strings.Split(help, "\n")
		for i, line := range lines {
			if singleDash.MatchString(line) {
				t.Errorf("%s --help: single-dash flag line %q", name, line)
			}
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			env := "LEASEHOLD_" + strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))
			if i+1 >= len(lines) || !strings.Contains(lines[i+1], "(env "+env) {
				t.Errorf("%s --help: flag --%s does not name its env twin %s", name, m[1], env)
			}
		}
	}
}

// TestE2ECLILeaderShortNamespace: "leasehold leader -n NS" selects the
// namespace, as kubectl's -n does.
func TestE2ECLILeaderShortNamespace(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	code, out, errOut := runCLI(t, "leader", "--kubeconfig", ts.Kubeconfig, "-n", "x", "--lease", "nobody", "-o", "json")
	if code != 3 || errOut != "leasehold leader: lease x/nobody not found\n" {
		t.Fatalf("leader -n x: exit %d, stderr %q; want 3 (no holder) and which lease was not found", code, errOut)
	}
	var v struct{ Namespace, Lease string }
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Namespace != "x" || v.Lease != "nobody" {
		t.Errorf("leader -n x -o json printed %q (%v); want namespace x, lease nobody", out, err)
	}
}

// TestE2ECLIUnknownCommand: an unknown command exits 2 and lists the
// commands on stderr.
func TestE2ECLIUnknownCommand(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "frobnicate", "--help")
	if code != 2 || out != "" || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "leasehold healthcheck") {
		t.Errorf("unknown command: exit %d, stdout %q, stderr %q; want 2 and the command list on stderr", code, out, errOut)
	}
}

// TestE2ECLITopLevelHelp: "leasehold --help", "-h" and "help" list the
// commands (not serve's flags); "help NAME" is "NAME --help".
func TestE2ECLITopLevelHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, _ := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, "leasehold healthcheck") || !strings.Contains(out, "leasehold serve --help") {
			t.Errorf("leasehold %s: exit %d, stdout %q; want the command list", args[0], code, out)
		}
	}
	code, out, errOut := runCLI(t, "help", "leader")
	if code != 0 || !strings.HasPrefix(out+errOut, "Usage: leasehold leader") {
		t.Errorf("leasehold help leader: exit %d, output %q", code, out+errOut)
	}
}
