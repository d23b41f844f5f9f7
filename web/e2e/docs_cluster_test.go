package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// docsClusterFaults are the sections of docs/cluster.md whose commands
// TestE2EDocsCluster runs, in the order of the file, each after the fault
// it is about, by title. The last is required; the others run when the
// file has them.
var docsClusterFaults = []struct {
	title string
	fault func(r *docsCluster)
}{
	{"A lost device", loseM3},
	{"A lost or retired device", loseM3},
	{"A stolen device", func(*docsCluster) {}}, // removed while it may still run
	{"Recovering from a lost quorum", func(r *docsCluster) {
		for _, dir := range []string{"d2", "d3", "r1"} {
			if r.devices[dir].proc != nil {
				r.kill(dir)
			}
		}
		r.stop("d1")
	}},
}

// loseM3 kills m3 (kill -9) and empties d3: the device is gone.
func loseM3(r *docsCluster) {
	r.kill("d3")
	if err := os.RemoveAll(filepath.Join(r.dir, "d3")); err != nil {
		r.t.Fatal(err)
	}
	r.waitVoters(2)
}

// TestE2EDocsCluster runs the commands of docs/cluster.md's sections on
// lost devices and lost quorums as an operator would type them, on three
// devices of one cluster and an API-only replica (data directories d1,
// d2, d3 with members m1, m2, m3, and r1, in one directory; token files T
// and T2), each section after the fault it describes (docsClusterFaults):
// for a lost device m3 is killed (kill -9) and d3 emptied; for the lost
// quorum every server but m1 is killed, leaving it without a quorum, and
// m1 is stopped.
//
// Every command must exit 0. A "leasehold serve" runs in the background,
// on the device its --data-dir names, until the test ends or the test
// kills it; it counts as started once /readyz answers 200. In a command,
// "https://device-1:6443" is m1's API URL and a trailing "..." the
// device's listen, peer and client addresses (free loopback ports). The
// lease written before the first fault must be in the recovered cluster.
func TestE2EDocsCluster(t *testing.T) {
	testneeds.Slow(t, "runs a three-member cluster through docs/cluster.md's faults")
	text, err := os.ReadFile(filepath.Join(moduleDir(t), "docs", "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := newDocsCluster(t)
	defer r.stopAll()
	r.serve("setup", "leasehold serve --cluster-init --cluster-token-file T --data-dir d1 --member-name m1 ...")
	r.serve("setup", "leasehold serve --join https://device-1:6443 --cluster-token-file T --data-dir d2 --member-name m2 ...")
	r.serve("setup", "leasehold serve --join https://device-1:6443 --cluster-token-file T --data-dir d3 --member-name m3 ...")
	r.serve("setup", "leasehold serve --join https://device-1:6443 --cluster-token-file T --replica --data-dir r1 --member-name r1 ...")
	r.waitVoters(3)
	ts := &testServer{URL: "http://" + r.devices["d1"].listen, Kubeconfig: filepath.Join(r.dir, "d1", "kubeconfig")}
	holder := "written-before-the-faults"
	if _, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("default").Create(context.Background(),
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "docs-cluster"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for i, f := range docsClusterFaults {
		section := f.title
		if !strings.Contains(string(text), "\n## "+section+"\n") && i < len(docsClusterFaults)-1 {
			continue
		}
		body, line := markdownSection(t, string(text), section)
		f.fault(r)
		ran := 0
		for _, block := range shellBlocks(body) {
			block.line += line
			for _, c := range splitCommands(block) {
				r.run(section, c)
				ran++
				if t.Failed() {
					return
				}
			}
		}
		if ran == 0 && i == len(docsClusterFaults)-1 {
			t.Fatalf("docs/cluster.md, %q: no command", section)
		}
		t.Logf("%q: %d commands ran, each exited 0", section, ran)
	}
	r.waitVoters(2)
	got, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("default").Get(context.Background(), "docs-cluster", metav1.GetOptions{})
	if err != nil || derefString(got.Spec.HolderIdentity) != holder {
		t.Errorf("the lease written before the faults, after the recovery: %v, %v", got, err)
	}
}

// markdownSection is the text under "## title", up to the next "## ",
// and the number of lines before it.
func markdownSection(t *testing.T, text, title string) (string, int) {
	t.Helper()
	i := strings.Index(text, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("docs/cluster.md has no section %q", title)
	}
	start := i + len(title) + 5
	body := text[start:]
	if j := strings.Index(body, "\n## "); j >= 0 {
		body = body[:j]
	}
	return body, strings.Count(text[:start], "\n")
}

// docsDevice is one device of TestE2EDocsCluster: a data directory and
// the addresses its server uses.
type docsDevice struct {
	listen, peer, client string
	proc                 *docProcess
}

// docsCluster runs docs/cluster.md's commands in dir.
type docsCluster struct {
	t       *testing.T
	dir     string
	env     []string
	devices map[string]*docsDevice // by data directory
}

func newDocsCluster(t *testing.T) *docsCluster {
	bin := leaseholdBinary(t)
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "leasehold")); err != nil {
		t.Fatal(err)
	}
	r := &docsCluster{t: t, dir: t.TempDir(), devices: map[string]*docsDevice{}}
	ports := freeLoopbackPorts(t, 9)
	for i := range 3 {
		r.devices[fmt.Sprintf("d%d", i+1)] = &docsDevice{listen: fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			peer: fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]), client: fmt.Sprintf("127.0.0.1:%d", ports[3*i+2])}
	}
	r.devices["r1"] = &docsDevice{listen: freeLoopbackAddr(t)} // a replica runs no etcd member
	for _, name := range []string{"T", "T2"} {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEHOLD_") && !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "PATH=") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return r
}

var docsDataDir = regexp.MustCompile(`--data-dir ([dr]\d)\b`)

// rewrite points a command at the test's devices.
func (r *docsCluster) rewrite(text string) string {
	text = commentTail.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "https://device-1:6443", "http://"+r.devices["d1"].listen)
	if m := docsDataDir.FindStringSubmatch(text); m != nil && strings.HasSuffix(text, " ...") {
		d := r.devices[m[1]]
		text = strings.TrimSuffix(text, "...") + "--listen " + d.listen
		if d.peer != "" {
			text += fmt.Sprintf(" --peer-listen %s --cluster-client-listen %s", d.peer, d.client)
		}
	}
	return text
}

// run runs one command of the docs: a server in the background, anything
// else to its end with exit status 0.
func (r *docsCluster) run(section string, c docCommand) {
	r.t.Helper()
	where := fmt.Sprintf("docs/cluster.md:%d (%s): %s", c.line, section, firstLine(c.text))
	if serverCommand.MatchString(c.text) {
		r.serve(where, c.text)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", r.rewrite(c.text))
	cmd.Dir, cmd.Env = r.dir, r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		r.t.Errorf("%s\nexit: %v after %v\noutput:\n%s%s", where, err, time.Since(start).Round(time.Millisecond), out.String(), r.logs())
		return
	}
	r.t.Logf("%s: exit 0 (%v)\n%s", where, time.Since(start).Round(time.Millisecond), out.String())
}

// serve starts the server of a "leasehold serve" command on the device
// its --data-dir names and waits until it is ready.
func (r *docsCluster) serve(where, text string) {
	t := r.t
	t.Helper()
	m := docsDataDir.FindStringSubmatch(text)
	if m == nil || r.devices[m[1]] == nil {
		t.Fatalf("%s: a server command without --data-dir d1, d2, d3 or r1", where)
	}
	d := r.devices[m[1]]
	if d.proc != nil {
		t.Fatalf("%s: %s already runs a server", where, m[1])
	}
	cmd := exec.Command("bash", "-c", "exec "+r.rewrite(text))
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.SysProcAttr = childSysProcAttr()
	p := &docProcess{cmd: cmd, what: where, out: &syncWriter{w: new(bytes.Buffer)}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	d.proc = p
	start := time.Now()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-p.exited:
			t.Fatalf("%s: the server exited (%v) before it was ready; output:\n%s", where, cmd.ProcessState, p.out.String())
		default:
		}
		if resp, err := client.Get("http://" + d.listen + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("%s: serving on %s after %v", where, d.listen, time.Since(start).Round(time.Millisecond))
				return
			}
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("%s: /readyz not 200 within 2m; output:\n%s", where, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the device's server with SIGKILL (a device destroyed or
// taken).
func (r *docsCluster) kill(dir string) {
	d := r.devices[dir]
	if d.proc == nil {
		r.t.Fatalf("%s runs no server to kill", dir)
	}
	_ = d.proc.cmd.Process.Kill()
	<-d.proc.exited
	d.proc = nil
}

// stop ends the device's server as an operator does (SIGTERM), or kills
// it when it does not end within 20 s.
func (r *docsCluster) stop(dir string) {
	d := r.devices[dir]
	start := time.Now()
	_ = d.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.proc.exited:
		r.t.Logf("%s: stopped in %v", dir, time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		r.t.Logf("%s: still running 20s after SIGTERM; killed", dir)
		_ = d.proc.cmd.Process.Kill()
		<-d.proc.exited
	}
	d.proc = nil
}

func (r *docsCluster) stopAll() {
	for dir, d := range r.devices {
		if d.proc != nil {
			if r.t.Failed() {
				r.t.Logf("%s's server:\n%s", dir, d.proc.out.String())
			}
			r.stop(dir)
		}
	}
}

// logs is every running server's output, for failures.
func (r *docsCluster) logs() string {
	var b strings.Builder
	for dir, d := range r.devices {
		if d.proc != nil {
			fmt.Fprintf(&b, "\n--- %s's server:\n%s", dir, d.proc.out.String())
		}
	}
	return b.String()
}

// waitVoters waits until d1's member sees want healthy voting members
// and a leader.
func (r *docsCluster) waitVoters(want int) {
	r.t.Helper()
	kc := filepath.Join(r.dir, "d1", "kubeconfig")
	waitHealthyVoters(r.t, "m1", want, func() (clusterStatus, error) {
		var st clusterStatus
		code, out, errOut := runCLI(r.t, "cluster", "status", "-o", "json", "--timeout", "5s", "--kubeconfig", kc)
		if code != 0 {
			return st, fmt.Errorf("leasehold cluster status: exit %d: %s", code, errOut)
		}
		return st, json.Unmarshal([]byte(out), &st)
	})
}
