package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// kubectlBin finds kubectl: $KUBECTL, then PATH, then /usr/bin/kubectl.
// A missing kubectl fails the test: CI installs it, and skipping would hide
// that the kubectl suite never ran.
func kubectlBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBECTL"); p != "" {
		return p
	}
	return testneeds.Kubectl(t)
}

// kubectlEnv runs kubectl against one server with a private HOME and
// discovery cache, so nothing leaks between tests or from the user.
type kubectlEnv struct {
	t          *testing.T
	bin        string
	kubeconfig string
	home       string
	cacheDir   string
	extraEnv   []string
}

func newKubectl(t *testing.T, ts *testServer) *kubectlEnv {
	home := t.TempDir()
	return &kubectlEnv{t: t, bin: kubectlBin(t), kubeconfig: ts.Kubeconfig, home: home, cacheDir: filepath.Join(home, "cache")}
}

func (k *kubectlEnv) command(ctx context.Context, args ...string) *exec.Cmd {
	full := append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)
	cmd := exec.CommandContext(ctx, k.bin, full...)
	cmd.Env = append([]string{"HOME=" + k.home, "PATH=" + os.Getenv("PATH"), "KUBECONFIG="}, k.extraEnv...)
	return cmd
}

// run runs kubectl to completion and returns its exit code and output.
func (k *kubectlEnv) run(args ...string) (code int, stdout, stderr string) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := k.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		k.t.Fatalf("kubectl %q timed out; stdout %q stderr %q", args, out.String(), errb.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		k.t.Fatalf("kubectl %q: %v", args, err)
	}
	return 0, out.String(), errb.String()
}

// ok runs kubectl, fails the test unless it exits 0, and returns stdout.
func (k *kubectlEnv) ok(args ...string) string {
	k.t.Helper()
	code, out, errOut := k.run(args...)
	if code != 0 {
		k.t.Fatalf("kubectl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// wantOutput runs kubectl and requires exit 0 and exactly stdout want.
func (k *kubectlEnv) wantOutput(want string, args ...string) {
	k.t.Helper()
	if got := k.ok(args...); got != want {
		k.t.Errorf("kubectl %s printed %q, want %q", strings.Join(args, " "), got, want)
	}
}

// streamLines starts a long-running kubectl and returns its stdout lines
// and a stop function that kills it.
func (k *kubectlEnv) streamLines(args ...string) (<-chan string, func() string) {
	k.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := k.command(ctx, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		k.t.Fatalf("start kubectl %q: %v", args, err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
	}()
	stop := func() string {
		cancel() // kills the process we started
		_ = cmd.Wait()
		return errb.String()
	}
	return lines, stop
}

// writeFile writes a manifest into dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
