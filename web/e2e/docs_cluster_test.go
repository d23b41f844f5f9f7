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
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// docsClusterFaults are the sections of docs/cluster.md whose commands
// TestE2EDocsCluster runs, in the order of the file, each after the fault
// it is about, by title. A required section must be in the file; the
// others run when the file has them. before runs what a subsection
// ("### title") of the section is about before its first command: the
// operator's waits and the devices' own doings that no command stands for.
var docsClusterFaults = []struct {
	title    string
	fault    func(r *docsCluster)
	required bool
	before   map[string]func(r *docsCluster)
}{
	{title: "A lost device", fault: loseM3},
	{title: "A lost or retired device", fault: loseM3},
	{title: "A stolen device", fault: func(*docsCluster) {}}, // removed while it may still run
	{title: "Recovering from a lost quorum", required: true, fault: func(r *docsCluster) {
		for _, dir := range []string{"d2", "d3", "r1"} {
			if r.devices[dir].proc != nil {
				r.kill(dir)
			}
		}
		r.stop("d1")
	}},
	{title: "Operating a fleet for years", required: true, fault: func(r *docsCluster) {
		// Three members again, for an upgrade that keeps a quorum: m3
		// joins the cluster the lost quorum left.
		r.serve("setup", "leasehold serve --join https://device-1:6443 --cluster-token-file d1/cluster/token --data-dir d3 --member-name m3 ...")
		r.waitVoters(3)
	}, before: map[string]func(r *docsCluster){
		// The schedule (docsSnapshotInterval) has written one.
		"Snapshots and restore": func(r *docsCluster) { r.waitSnapshot("d2") },
		// r1 joins too (after rotate-certs, which would wait up to a
		// minute for a replica's next check), then m3 and r1 lose their
		// power for a year. Their certificates stay valid (a year is not
		// waited for here): TestMemberWithExpiredCertificate covers the
		// refusal of an expired one; the way back is the same.
		"A device back after a year off": func(r *docsCluster) {
			if err := os.RemoveAll(filepath.Join(r.dir, "r1")); err != nil { // the lost cluster's replica
				r.t.Fatal(err)
			}
			r.serve("setup", "leasehold serve --join https://device-1:6443 --cluster-token-file d1/cluster/token --replica --data-dir r1 --member-name r1 ...")
			r.kill("d3")
			r.kill("r1")
		},
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
// lost devices and lost quorums, and its runbook "Operating a fleet for
// years", as an operator would type them, on three devices of one cluster
// and an API-only replica (data directories d1, d2, d3 with members m1,
// m2, m3, and r1, in one directory; token files T and T2), each section
// after the fault it describes (docsClusterFaults): for a lost device m3
// is killed (kill -9) and d3 emptied; for the lost quorum every server but
// m1 is killed, leaving it without a quorum, and m1 is stopped. The
// runbook then runs on the two members that recovery leaves and m3, which
// joins them: its certificates, snapshots and upgrade (a restart of m2 on
// the same binary: upgrade_test.go runs real releases), then a device back
// after a year off (r1 joins, m3 and r1 are killed, and come back as the
// runbook says).
//
// Every command must exit 0. A "leasehold serve" runs in the background,
// on the device its --data-dir names, until the test ends or the test
// kills it; it counts as started once /readyz answers 200, and on a
// device whose server runs it is a restart (SIGTERM first). In a command,
// "https://device-1:6443" is m1's API URL, a trailing "..." the device's
// listen, peer and client addresses (free loopback ports), and /backups/
// a directory beside the devices'. Every server snapshots every
// docsSnapshotInterval. The lease written before the first fault must be
// in the recovered cluster.
func TestE2EDocsCluster(t *testing.T) {
	testneeds.Slow(t, "runs a three-member cluster through docs/cluster.md's faults")
	testneeds.Kubectl(t)                                         // the runbook reads /readyz and /metrics with it
	testneeds.Tool(t, "jq", "apt-get install -y jq (make deps)") // and waits for healthy members with it
	// Beside the other parallel tests: it mostly waits on its servers, and
	// nothing it runs has a timing bound (50 s of the serial tests before).
	t.Parallel()
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

	for _, f := range docsClusterFaults {
		section := f.title
		if !strings.Contains(string(text), "\n## "+section+"\n") && !f.required {
			continue
		}
		body, line := markdownSection(t, string(text), section)
		began := time.Now()
		f.fault(r)
		subsections := markdownSubsections(body)
		for title := range f.before {
			if _, ok := subsections[title]; !ok {
				t.Fatalf("docs/cluster.md, %q has no subsection %q (docsClusterFaults)", section, title)
			}
		}
		ran, done := 0, map[string]bool{}
		for _, block := range shellBlocks(body) {
			if title := subsectionOf(subsections, block.line); f.before[title] != nil && !done[title] {
				f.before[title](r)
				done[title] = true
			}
			block.line += line
			for _, c := range splitCommands(block) {
				r.run(section, c)
				ran++
				if t.Failed() {
					return
				}
			}
		}
		if ran == 0 && f.required {
			t.Fatalf("docs/cluster.md, %q: no command", section)
		}
		t.Logf("%q: %d commands ran, each exited 0 (%v with the fault and the waits before them)", section, ran, time.Since(began).Round(time.Millisecond))
	}
	r.waitVoters(3) // m1, m2 and the m3 back from a year off
	got, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("default").Get(context.Background(), "docs-cluster", metav1.GetOptions{})
	if err != nil || derefString(got.Spec.HolderIdentity) != holder {
		t.Errorf("the lease written before the faults, after the recovery: %v, %v", got, err)
	}
}

// markdownSubsections maps the titles of a section's "### " headings to
// their lines in it.
func markdownSubsections(body string) map[string]int {
	out := map[string]int{}
	for i, l := range strings.Split(body, "\n") {
		if title, ok := strings.CutPrefix(l, "### "); ok {
			out[strings.TrimSpace(title)] = i
		}
	}
	return out
}

// subsectionOf is the title of the subsection holding line ("" before the
// first).
func subsectionOf(subsections map[string]int, line int) string {
	best, at := "", -1
	for title, l := range subsections {
		if l < line && l > at {
			best, at = title, l
		}
	}
	return best
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
		if !strings.HasPrefix(kv, "LEASEHOLD_") && !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "HOME=") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir(),
		"LEASEHOLD_SNAPSHOT_INTERVAL="+docsSnapshotInterval)
	if err := os.Mkdir(filepath.Join(r.dir, "backups"), 0o700); err != nil {
		t.Fatal(err)
	}
	return r
}

// docsSnapshotInterval is every server's --snapshot-interval (the
// environment's LEASEHOLD_SNAPSHOT_INTERVAL), so that the runbook's
// snapshot commands find a scheduled snapshot without the 12 hours of the
// default.
const docsSnapshotInterval = "5s"

var docsDataDir = regexp.MustCompile(`--data-dir ([dr]\d)\b`)

// rewrite points a command at the test's devices.
func (r *docsCluster) rewrite(text string) string {
	text = commentTail.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "https://device-1:6443", "http://"+r.devices["d1"].listen)
	text = strings.ReplaceAll(text, " /backups/", " backups/")
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
		// A device runs one server: starting it again is a restart
		// (an upgrade's), which stops the running one first, as the
		// service manager does.
		r.stop(m[1])
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

// stopAll stops every server: the replica first, while the members it
// needs still run, then the members at once (the last member left alone
// has no quorum, which makes its stop slow: they share that wait).
func (r *docsCluster) stopAll() {
	var members sync.WaitGroup
	for _, dir := range []string{"r1", "d1", "d2", "d3"} {
		d := r.devices[dir]
		if d.proc == nil {
			continue
		}
		if r.t.Failed() {
			r.t.Logf("%s's server:\n%s", dir, d.proc.out.String())
		}
		if d.peer == "" {
			r.stop(dir)
			continue
		}
		members.Add(1)
		go func() {
			defer members.Done()
			r.stop(dir)
		}()
	}
	members.Wait()
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

// waitSnapshot waits until the device's member has written a scheduled
// snapshot into its snapshot directory.
func (r *docsCluster) waitSnapshot(dir string) {
	r.t.Helper()
	eventually(r.t, 60*time.Second, dir+" wrote a scheduled snapshot", func() (bool, string) {
		files, err := filepath.Glob(filepath.Join(r.dir, dir, "snapshots", "leasehold-*.db"))
		return len(files) > 0, fmt.Sprintf("%v, %v", files, err)
	})
}
