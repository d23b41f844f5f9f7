package e2e

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// The leasehold binary under test, built once per test process.

// module is the import path of the leasehold command.
const module = "github.com/leasehold/leasehold"

// binaryVersion is the version the binary is built with (-X main.Version,
// as release builds set it).
const binaryVersion = "v0.0.0-e2e"

var (
	binDir    string // removed after the tests
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain runs up to 3 parallel tests at once unless -parallel says
// otherwise: they spend most of their time waiting on the servers and
// clients they start as processes, which the default (GOMAXPROCS, 2 on
// the CI machine) does not count.
//
// client-go logs through klog straight to stderr (reflectors retrying a
// watch against a server a test stopped, leader election's progress),
// from every parallel test at once and outside any test's output: in a
// failed run it buries the failures, and CI shows only the tail. So klog
// is discarded, unless -v asks for everything.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		klog.SetLogger(logr.Discard())
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", "3"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "leasehold-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// moduleRoot is the directory of go.mod: go list and go build run there.
var moduleRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the leasehold module")
	}
	return filepath.Dir(gomod), nil
})

// moduleDir returns the module root or fails the test.
func moduleDir(t testing.TB) string {
	t.Helper()
	dir, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// leaseholdBinary returns the path of the leasehold binary, building it
// on first use (with -race when the tests run with it), unless
// LEASEHOLD_E2E_BINARY names one built the same way (prebuiltBinary).
func leaseholdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		if bin := os.Getenv("LEASEHOLD_E2E_BINARY"); bin != "" {
			binPath, buildErr = prebuiltBinary(bin)
			if buildErr == nil {
				buildErr = openSources(root)
			}
			return
		}
		bin := filepath.Join(binDir, "leasehold")
		args := []string{"build", "-o", bin, "-ldflags", "-X main.Version=" + binaryVersion}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, module)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		binPath = bin
		buildErr = openSources(root)
	})
	if buildErr != nil {
		t.Fatalf("build the leasehold binary: %v", buildErr)
	}
	return binPath
}

// prebuiltBinary checks that bin was built as leaseholdBinary builds it
// (the version the tests expect, -race as the tests run) and returns its
// absolute path. .ci/test builds the binary once, before it starts the
// two go test processes it runs web/e2e in (TestE2EDocsCommands runs
// beside the rest), each of which would otherwise link its own (about
// 10 s of CPU on the CI machine's two cores). It must be built from the
// tree under test: openSources still makes the result cache see the
// sources, not the binary.
func prebuiltBinary(bin string) (string, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("LEASEHOLD_E2E_BINARY=%s: %w", bin, err)
	}
	info, err := buildinfo.ReadFile(abs)
	if err != nil {
		return "", fmt.Errorf("LEASEHOLD_E2E_BINARY=%s: not a Go binary: %w", bin, err)
	}
	var ldflags string
	race := false
	for _, s := range info.Settings {
		switch s.Key {
		case "-ldflags":
			ldflags = s.Value
		case "-race":
			race = s.Value == "true"
		}
	}
	if info.Path != module || ldflags != "-X main.Version="+binaryVersion || race != raceEnabled {
		return "", fmt.Errorf("LEASEHOLD_E2E_BINARY=%s: built as %s with -ldflags %q, -race=%v; the tests need %s built with "+
			"go build -ldflags \"-X main.Version=%s\"%s", bin, info.Path, ldflags, race, module, binaryVersion,
			map[bool]string{true: " -race", false: ""}[raceEnabled])
	}
	return abs, nil
}

// openSources opens (and closes) every file the binary is built from: go
// test's result cache only sees the files the test process opens, so this
// makes a change anywhere in the server rerun the suite instead of
// replaying a cached result.
func openSources(root string) error {
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`, module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list the binary's sources: %w", err)
	}
	files := append(strings.Fields(string(out)), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	for _, f := range files {
		if fh, err := os.Open(f); err == nil {
			fh.Close()
		}
	}
	return nil
}

// runCLI runs one leasehold command line as a process and returns its exit
// code with what it printed. The environment is the test's (t.Setenv
// included).
func runCLI(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb strings.Builder
	cmd := exec.CommandContext(ctx, leaseholdBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("leasehold %q: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// serverProcess is "leasehold serve" running as a child process.
type serverProcess struct {
	cmd    *exec.Cmd
	log    *syncWriter // stdout and stderr
	url    string      // what it wrote to its --ready-file
	exited chan struct{}
	code   int // exit code, valid once exited is closed
}

// spawnServer runs "leasehold serve --ready-file F args..." and waits
// until the server wrote its URL to F (ready) or exited (not ready).
// onLine, when not nil, sees every line of its standard output. The
// process is killed when the test ends, if it still runs then.
func spawnServer(t testing.TB, args []string, onLine func(string)) (p *serverProcess, ready bool) {
	t.Helper()
	return spawnServerVia(t, nil, args, onLine)
}

// spawnServerVia is spawnServer through a wrapper that execs the binary
// (such as "ip netns exec NS"), so that the process is still leasehold's.
func spawnServerVia(t testing.TB, wrapper, args []string, onLine func(string)) (p *serverProcess, ready bool) {
	t.Helper()
	return spawnBinary(t, leaseholdBinary(t), wrapper, args, onLine)
}

// spawnBinary is spawnServerVia with the leasehold binary bin: another
// release's, for the upgrade tests.
func spawnBinary(t testing.TB, bin string, wrapper, args []string, onLine func(string)) (p *serverProcess, ready bool) {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "ready")
	argv := append(append(slices.Clone(wrapper), bin, "serve", "--ready-file", readyFile), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = childSysProcAttr()
	p = &serverProcess{cmd: cmd, log: &syncWriter{w: new(bytes.Buffer)}, exited: make(chan struct{})}
	var stdout io.Reader
	if onLine == nil {
		cmd.Stdout, cmd.Stderr = p.log, p.log
	} else {
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, cmd.Stderr = pipe, p.log
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start leasehold serve: %v", err)
	}
	go func() {
		defer close(p.exited)
		if stdout != nil {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				fmt.Fprintln(p.log, sc.Text())
				onLine(sc.Text())
			}
			_, _ = io.Copy(io.Discard, stdout)
		}
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(p.kill)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(readyFile); err == nil && strings.HasSuffix(string(b), "\n") {
			p.url = strings.TrimSpace(string(b))
			return p, true
		}
		select {
		case <-p.exited:
			return p, false
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("leasehold serve %q not ready after 30s; log:\n%s", args, p.stacks())
		}
	}
}

// hostPort is the host:port of the URL the server reported.
func (p *serverProcess) hostPort() string {
	u, err := url.Parse(p.url)
	if err != nil {
		return p.url
	}
	return u.Host
}

// stop sends SIGTERM and waits up to timeout for the process to exit; it
// reports the exit code, or false when it had to be killed.
func (p *serverProcess) stop(timeout time.Duration) (code int, ok bool) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.code, true
	case <-time.After(timeout):
		return -1, false
	}
}

// kill ends the process with SIGKILL (no shutdown, no final commit) and
// waits for it.
func (p *serverProcess) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stacks makes a process that does not stop print its goroutines (SIGQUIT)
// and returns its log with them; the process is gone afterwards.
func (p *serverProcess) stacks() string {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
		p.kill()
	}
	return p.log.String()
}

// testServer is a leasehold server in a child process (the real binary),
// listening on a random loopback port with a fresh data dir.
type testServer struct {
	URL        string // http://127.0.0.1:port
	DataDir    string
	Kubeconfig string // written by the server for kubectl and client-go

	proc     *serverProcess
	stopOnce sync.Once
}

// startServer starts a server and stops it when the test ends. extraArgs are
// appended to "serve --listen 127.0.0.1:0 --data-dir <tmp> --log-level warn".
func startServer(t testing.TB, extraArgs ...string) *testServer {
	t.Helper()
	return startServerIn(t, t.TempDir(), extraArgs...)
}

// startServerIn is startServer on an existing data directory (restarts).
func startServerIn(t testing.TB, dataDir string, extraArgs ...string) *testServer {
	t.Helper()
	args := append([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"}, extraArgs...)
	p, ready := spawnServer(t, args, nil)
	if !ready {
		t.Fatalf("server exited with code %d before it was ready; log:\n%s", p.code, p.log.String())
	}
	ts := &testServer{URL: "http://" + p.hostPort(), DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), proc: p}
	t.Cleanup(func() { ts.Stop(t) })
	return ts
}

// Stop shuts the server down (SIGTERM) and waits for it; safe to call
// twice.
func (ts *testServer) Stop(t testing.TB) {
	t.Helper()
	first := false
	ts.stopOnce.Do(func() { first = true })
	if !first {
		return
	}
	code, ok := ts.proc.stop(15 * time.Second)
	switch {
	case !ok:
		t.Errorf("server did not stop within 15s; log and goroutines:\n%s", ts.proc.stacks())
	case code != 0:
		t.Errorf("server exited with code %d; log:\n%s", code, ts.Log())
	}
}

// Log returns what the server logged so far.
func (ts *testServer) Log() string { return ts.proc.log.String() }

// Pid is the server process's id.
func (ts *testServer) Pid() int { return ts.proc.cmd.Process.Pid }

// reportedURL is the URL the server reported in its ready file (https://
// when it serves TLS).
func (ts *testServer) reportedURL() string { return ts.proc.url }
