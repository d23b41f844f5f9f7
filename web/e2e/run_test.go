package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// Timers of the "leasehold run" tests: 3 s leases, so that the suite stays
// short. SIGTERM comes 2 s after the last renewal and SIGKILL 0.5 s later,
// leaving 0.5 s before anyone else may take over.
const (
	runLease    = 3 * time.Second
	runDeadline = 2 * time.Second
	runRetry    = 500 * time.Millisecond
	runGrace    = 500 * time.Millisecond
)

// runChildScript is the supervised program: it appends start, tick (every
// 0.1 s) and stop records with wall-clock nanoseconds to the file $1, so
// that the test can reconstruct who ran when. It exits with $STOP_CODE when
// asked to stop, unless $IGNORE_TERM is set: then it records "term" and
// carries on until SIGKILL. Its traps are set before its start record: a
// test that signals it once it sees that record must find them (at load
// 30 a SIGTERM came first, and the shell died with 143, no stop record).
const runChildScript = `#!/bin/sh
f=$1
id=$LEASEHOLD_HOLDER_IDENTITY
if [ -n "$IGNORE_TERM" ]; then
	trap 'echo "term $id $(date +%s%N)" >> "$f"' TERM INT
else
	trap 'echo "stop $id $(date +%s%N)" >> "$f"; exit ${STOP_CODE:-0}' TERM INT
fi
echo "start $id $(date +%s%N) $LEASEHOLD_LEASE_TRANSITIONS $LEASEHOLD_LEASE_NAMESPACE/$LEASEHOLD_LEASE_NAME $LEASEHOLD_ACQUIRE_TIME $LEASEHOLD_SERVER" >> "$f"
while :; do
	# date may die from the SIGTERM sent to the whole group: no record then.
	t=$(date +%s%N) && echo "tick $id $t" >> "$f"
	sleep 0.1 &
	wait $!
done
`

// TestE2ERun runs the leasehold binary's "run" and "leader" commands as
// separate processes against real servers.
func TestE2ERun(t *testing.T) {
	testneeds.Slow(t, "lease failovers of leasehold run with real lease durations")
	t.Parallel() // waits on real lease durations, no CPU-bound check
	dir := t.TempDir()
	e := newRunEnv(t, dir)
	t.Run("Failover", func(t *testing.T) { t.Parallel(); testRunFailover(t, e) })
	t.Run("Partition", func(t *testing.T) { t.Parallel(); testRunPartition(t, e, false) })
	t.Run("PartitionIgnoresSIGTERM", func(t *testing.T) { t.Parallel(); testRunPartition(t, e, true) })
	t.Run("Candidate", func(t *testing.T) { t.Parallel(); testRunCandidate(t, e) })
	t.Run("Handover", func(t *testing.T) { t.Parallel(); testRunHandover(t, e) })
	t.Run("ExitCodes", func(t *testing.T) { t.Parallel(); testRunExitCodes(t, e) })
	t.Run("Flags", testRunFlags)
}

type runEnv struct{ bin, script string }

// newRunEnv writes the child that records its own start and exit
// (runChildScript) into dir, for "leasehold run" processes of the binary
// under test.
func newRunEnv(t *testing.T, dir string) runEnv {
	t.Helper()
	script := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(script, []byte(runChildScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return runEnv{bin: leaseholdBinary(t), script: script}
}

// runProc is one "leasehold run" process.
type runProc struct {
	id     string
	cmd    *exec.Cmd
	stderr *syncWriter
	done   chan struct{}
	code   int // valid after done
}

// start runs "leasehold run" with the test timers, identity id, the given
// flags and COMMAND (the record script on file when command is empty).
func (e runEnv) start(t *testing.T, id, file string, flags []string, command ...string) *runProc {
	t.Helper()
	return e.startEnv(t, id, file, nil, flags, command...)
}

// startEnv is start with extra environment variables for the runner (and
// so for its child).
func (e runEnv) startEnv(t *testing.T, id, file string, env, flags []string, command ...string) *runProc {
	t.Helper()
	args := []string{"run", "--identity", id,
		"--lease-duration", runLease.String(), "--renew-deadline", runDeadline.String(),
		"--retry-period", runRetry.String(), "--grace-period", runGrace.String(),
		"--log-format", "json", "--log-level", "debug"}
	args = append(args, flags...)
	if len(command) == 0 {
		command = []string{"sh", e.script, file}
	}
	args = append(append(args, "--"), command...)
	p := &runProc{id: id, stderr: &syncWriter{w: new(bytes.Buffer)}, done: make(chan struct{})}
	p.cmd = exec.Command(e.bin, args...)
	p.cmd.Env = append(append(os.Environ(), "STOP_CODE=42"), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start leasehold run: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("leasehold run %s log:\n%s", id, p.stderr.String())
		}
	})
	return p
}

func (p *runProc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to leasehold run %s: %v", sig, p.id, err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *runProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("leasehold run %s still running after %v; log:\n%s", p.id, timeout, p.stderr.String())
		return -1
	}
}

// logEntry returns the first JSON log record of p with the given message.
func (p *runProc) logEntry(msg string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// record is one line of the shared file.
type record struct {
	kind, id string
	at       time.Time
	fields   []string // start: transitions, ns/name, acquire time, server
}

func readRecords(t *testing.T, file string) []record {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []record
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("bad record %q", line)
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatalf("bad record %q: %v", line, err)
		}
		out = append(out, record{kind: f[0], id: f[1], at: time.Unix(0, ns), fields: f[3:]})
	}
	return out
}

// stopRecordWait is how long a test waits for a child's stop record that
// should already be there: the order of stops and starts is checked on the
// records' own times, so the wait only has to outlast a loaded machine's
// delay in writing the record (1 s did not, at a load of 50).
const stopRecordWait = 10 * time.Second

// waitRecord polls the file for a record matching ok.
func waitRecord(t *testing.T, file string, timeout time.Duration, what string, ok func(record) bool) record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range readRecords(t, file) {
			if ok(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s record within %v; records:\n%s", what, timeout, dumpRecords(t, file))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dumpRecords(t *testing.T, file string) string {
	data, _ := os.ReadFile(file)
	return string(data)
}

// childRun is one run of the child: from its start record to its last one.
type childRun struct {
	id          string
	token       int
	start, last time.Time
	stopped     bool
}

// childRuns groups the records per run: a child writes only its own
// records, in order, so a run lasts from "start" to its identity's last
// record before that identity's next "start".
func childRuns(t *testing.T, recs []record) []childRun {
	t.Helper()
	var runs []childRun
	open := map[string]int{} // identity -> index into runs
	for _, r := range recs {
		switch r.kind {
		case "start":
			tok, err := strconv.Atoi(r.fields[0])
			if err != nil {
				t.Fatalf("start record without a fencing token: %v", r)
			}
			open[r.id] = len(runs)
			runs = append(runs, childRun{id: r.id, token: tok, start: r.at, last: r.at})
		case "tick", "term", "stop":
			i, ok := open[r.id]
			if !ok {
				t.Fatalf("%s record before any start: %v", r.kind, r)
			}
			runs[i].last = r.at
			runs[i].stopped = r.kind == "stop"
		}
	}
	return runs
}

// checkAtMostOne asserts that no two child runs overlapped and that every
// new run got a larger fencing token than the run before it.
func checkAtMostOne(t *testing.T, file string) []childRun {
	t.Helper()
	runs := childRuns(t, readRecords(t, file))
	slices.SortFunc(runs, func(a, b childRun) int { return a.start.Compare(b.start) })
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		if !cur.start.After(prev.last) {
			t.Errorf("two children at once: %s ran %s..%s, %s started at %s",
				prev.id, prev.start.Format(time.StampMicro), prev.last.Format(time.StampMicro), cur.id, cur.start.Format(time.StampMicro))
		}
		if cur.token <= prev.token {
			t.Errorf("fencing token did not grow: %s had %d, then %s got %d", prev.id, prev.token, cur.id, cur.token)
		}
	}
	return runs
}

func leaseHolder(t *testing.T, ts *testServer, name string) string {
	t.Helper()
	l, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease %s: %v", name, err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// testRunFailover: three runners on one lease. Killing the leader's runner
// with SIGKILL hands over within the lease duration plus polling; SIGTERM
// forwards to the child, propagates its exit code and releases at once.
// "leasehold leader" prints and follows the holder throughout.
func testRunFailover(t *testing.T, e runEnv) {
	ts := startServer(t)
	file := filepath.Join(t.TempDir(), "records")
	const lease = "failover"

	watchOut := &syncWriter{w: new(bytes.Buffer)}
	watch := exec.Command(e.bin, "leader", "--server", ts.URL, "--lease", lease, "--watch")
	watch.Stdout, watch.Stderr = watchOut, watchOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })

	procs := map[string]*runProc{}
	for _, id := range []string{"r1", "r2", "r3"} {
		procs[id] = e.start(t, id, file, []string{"--kubeconfig", ts.Kubeconfig, "--lease", lease})
	}
	first := waitRecord(t, file, 10*time.Second, "first start", func(r record) bool { return r.kind == "start" })
	if want := []string{"0", "default/" + lease}; !slices.Equal(first.fields[:2], want) {
		t.Errorf("first child's token and lease = %q, want %q", first.fields[:2], want)
	}
	// The lease was acquired before the child started, and within the
	// lease's duration of it (how soon after depends on the machine's load).
	if at, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", first.fields[2]); err != nil || first.at.Sub(at) < -100*time.Millisecond || first.at.Sub(at) > runLease {
		t.Errorf("LEASEHOLD_ACQUIRE_TIME = %q (%v), want RFC 3339 micro at most %v before the child's start at %s", first.fields[2], err, runLease, first.at)
	}
	if first.fields[3] != ts.URL {
		t.Errorf("LEASEHOLD_SERVER = %q, want %q", first.fields[3], ts.URL)
	}

	// The one-shot form, configured through environment twins.
	leader := exec.Command(e.bin, "leader")
	leader.Env = append(os.Environ(), "LEASEHOLD_SERVER="+ts.URL, "LEASEHOLD_LEASE="+lease)
	out, err := leader.Output()
	if err != nil || string(out) != first.id+"\n" {
		t.Errorf("leasehold leader = %q, %v; want %q, exit 0", out, err, first.id+"\n")
	}

	time.Sleep(time.Second) // a few renewals
	killedAt := time.Now()
	procs[first.id].signal(t, syscall.SIGKILL)
	second := waitRecord(t, file, 10*time.Second, "second start", func(r record) bool { return r.kind == "start" && r.id != first.id })
	failover := second.at.Sub(killedAt)
	// A standby judges expiry from when it saw the last renewal (up to one
	// jittered retry period after it was written) and notices the expiry
	// on its next poll (another one).
	limit := runLease + 2*runRetry*12/10 + 300*time.Millisecond
	t.Logf("failover after SIGKILL of the leader's runner: %v (limit %v)", failover.Round(time.Millisecond), limit)
	if failover > limit {
		t.Errorf("failover took %v, want at most %v", failover, limit)
	}
	if failover < runLease-runRetry {
		t.Errorf("failover after %v: a standby took over before the lease could have expired", failover)
	}
	for _, r := range readRecords(t, file) {
		if r.id == first.id && r.at.After(killedAt.Add(200*time.Millisecond)) {
			t.Errorf("the killed runner's child still wrote %v (parent-death signal missing?)", r)
		}
	}

	// SIGTERM: forwarded to the child, exit code passed on, lease released
	// so the last standby starts within about a retry period.
	procs[second.id].signal(t, syscall.SIGTERM)
	if code := procs[second.id].wait(t, 5*time.Second); code != 42 {
		t.Errorf("leasehold run exit code after SIGTERM = %d, want the child's 42", code)
	}
	stop := waitRecord(t, file, stopRecordWait, "stop", func(r record) bool { return r.kind == "stop" && r.id == second.id })
	third := waitRecord(t, file, 5*time.Second, "third start", func(r record) bool {
		return r.kind == "start" && r.id != first.id && r.id != second.id
	})
	if gap := third.at.Sub(stop.at); gap > 2*runRetry*12/10+200*time.Millisecond {
		t.Errorf("next child started %v after a released lease, want about one retry period", gap)
	}
	procs[third.id].signal(t, syscall.SIGINT)
	if code := procs[third.id].wait(t, 5*time.Second); code != 42 {
		t.Errorf("leasehold run exit code after SIGINT = %d, want 42", code)
	}
	if h := leaseHolder(t, ts, lease); h != "" {
		t.Errorf("holderIdentity after SIGTERM = %q, want \"\" (released)", h)
	}
	runs := checkAtMostOne(t, file)
	if len(runs) != 3 {
		t.Errorf("%d child runs, want 3: %+v", len(runs), runs)
	}

	// The watcher saw every holder in turn (and vacancies in between).
	eventually(t, 2*time.Second, "leader --watch output", func() (bool, string) {
		var holders []string
		for l := range strings.Lines(watchOut.String()) {
			if l = strings.TrimSpace(l); l != "" {
				holders = append(holders, l)
			}
		}
		want := []string{first.id, second.id, third.id}
		return slices.Equal(holders, want), fmt.Sprintf("holders %q, want %q; output %q", holders, want, watchOut.String())
	})
}

// startServerProcess runs "leasehold serve" as its own process, so that it
// can be frozen with SIGSTOP, and returns its URL.
func startServerProcess(t *testing.T, bin string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Msg == "Serving the Lease API" {
				urlc <- m.URL
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u := <-urlc:
		return u, cmd
	case <-time.After(20 * time.Second):
		t.Fatal("server process not serving after 20s")
		return "", nil
	}
}

// testRunPartition freezes the server: the leader can no longer renew and
// must stop its child before the lease could expire for anyone else, i.e.
// before its last successful renewal + the lease duration. With ignoreTerm
// the child ignores SIGTERM and has to be killed at the end of the grace
// period.
func testRunPartition(t *testing.T, e runEnv, ignoreTerm bool) {
	url, srv := startServerProcess(t, e.bin)
	file := filepath.Join(t.TempDir(), "records")
	var env []string
	if ignoreTerm {
		env = []string{"IGNORE_TERM=1"}
	}
	procs := map[string]*runProc{}
	for _, id := range []string{"p1", "p2"} {
		procs[id] = e.startEnv(t, id, file, env, []string{"--server", url, "--lease", "partition"})
	}
	first := waitRecord(t, file, 10*time.Second, "first start", func(r record) bool { return r.kind == "start" })
	leader := procs[first.id]
	time.Sleep(time.Second)

	frozenAt := time.Now()
	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = srv.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	// The runner logs when it reaped the child: the child was dead by then.
	eventually(t, runLease+time.Second, "child stopped", func() (bool, string) {
		return leader.logEntry("Stopped the child") != nil, leader.stderr.String()
	})
	resume()
	lost, stopped := leader.logEntry("Lost the lease; stopping the child"), leader.logEntry("Stopped the child")
	lastRenew, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(lost["last_renew"]))
	reaped, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(stopped["time"]))
	if lost == nil || err1 != nil || err2 != nil {
		t.Fatalf("runner log lacks the loss or the stop (%v, %v):\n%s", err1, err2, leader.stderr.String())
	}
	if lastRenew.After(frozenAt) {
		t.Errorf("last successful renewal %s is after the server froze at %s", lastRenew.Format(time.StampMicro), frozenAt.Format(time.StampMicro))
	}
	var lastWrite, termAt time.Time
	for _, r := range readRecords(t, file) {
		if r.id == first.id && r.at.Before(reaped) {
			lastWrite = r.at
			if r.kind == "term" || r.kind == "stop" {
				termAt = r.at
			}
		}
	}
	expiry := lastRenew.Add(runLease)
	margin := expiry.Sub(reaped)
	t.Logf("partitioned leader (child ignores SIGTERM: %v): froze %v after the last renewal; SIGTERM seen after %v, child reaped after %v, %v before the lease could expire",
		ignoreTerm, frozenAt.Sub(lastRenew).Round(time.Millisecond), termAt.Sub(lastRenew).Round(time.Millisecond),
		reaped.Sub(lastRenew).Round(time.Millisecond), margin.Round(time.Millisecond))
	if margin <= 0 || !lastWrite.Before(expiry) {
		t.Errorf("child reaped at %s (last write %s), after the lease could expire at %s",
			reaped.Format(time.StampMicro), lastWrite.Format(time.StampMicro), expiry.Format(time.StampMicro))
	}
	if early := termAt.Sub(lastRenew); termAt.IsZero() || early < runDeadline {
		t.Errorf("child got SIGTERM %v after the last renewal, want the renew deadline %v", early, runDeadline)
	}
	if killed := leader.logEntry("The child outlived its grace period; sending SIGKILL") != nil; killed != ignoreTerm {
		t.Errorf("SIGKILL sent: %v, want %v", killed, ignoreTerm)
	}
	// A child that ignores SIGTERM gets its whole grace period before the
	// SIGKILL, unless that would run past the renew deadline plus the
	// grace period from the last renewal (a loaded machine may see the
	// deadline late): then it is killed at that moment, which keeps
	// lease duration - renew deadline - grace of margin before others may
	// take over. Judged on the runner's own log times (when it sent each
	// signal), not on the child's writes, which a loaded machine may not
	// schedule during the grace period.
	if ignoreTerm {
		killed := leader.logEntry("The child outlived its grace period; sending SIGKILL")
		killAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(killed["time"]))
		lostAt, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(lost["time"]))
		if err != nil || err2 != nil {
			t.Fatalf("runner log times: %v, %v", err, err2)
		}
		// The log's wall-clock times may differ from the runner's
		// monotonic timer by a clock slew of a few milliseconds.
		due := lostAt.Add(runGrace)
		if hard := lastRenew.Add(runDeadline + runGrace); hard.Before(due) {
			due = hard
		}
		if killAt.Before(due.Add(-50 * time.Millisecond)) {
			t.Errorf("SIGKILL %v after SIGTERM (%v after the last renewal), before the grace period %v or the renew deadline %v plus it",
				killAt.Sub(lostAt), killAt.Sub(lastRenew), runGrace, runDeadline)
		}
	}

	// After the partition heals, exactly one runner leads again.
	waitRecord(t, file, 15*time.Second, "start after the partition", func(r record) bool { return r.kind == "start" && r.at.After(reaped) })
	for _, p := range procs {
		p.signal(t, syscall.SIGTERM)
	}
	if ignoreTerm {
		// The leader's child ignores the forwarded SIGTERM: a second
		// signal (once the first was handled: signals do not queue) kills.
		for _, p := range procs {
			eventually(t, 5*time.Second, p.id+" handles SIGTERM", func() (bool, string) {
				select {
				case <-p.done:
					return true, ""
				default:
					return p.logEntry("Stopping: forwarding the signal to the child") != nil, p.stderr.String()
				}
			})
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		p.wait(t, 10*time.Second)
	}
	checkAtMostOne(t, file)
}

// testRunCandidate: two --candidate runners; the election controller
// grants the lease to the first, then hands it to the one with the older
// emulation version, which the first steps down for.
func testRunCandidate(t *testing.T, e runEnv) {
	ts := startServer(t)
	file := filepath.Join(t.TempDir(), "records")
	flags := func(emulation string) []string {
		return []string{"--server", ts.URL, "--lease", "coordinated", "--candidate", "--binary-version", "1.37.0", "--emulation-version", emulation}
	}
	newer := e.start(t, "c-newer", file, flags("1.37.0"))
	waitRecord(t, file, 15*time.Second, "c-newer start", func(r record) bool { return r.kind == "start" && r.id == "c-newer" })
	older := e.start(t, "c-older", file, flags("1.36.0"))
	got := waitRecord(t, file, 20*time.Second, "c-older start", func(r record) bool { return r.kind == "start" && r.id == "c-older" })
	stepped := waitRecord(t, file, stopRecordWait, "c-newer stop", func(r record) bool { return r.kind == "stop" && r.id == "c-newer" })
	if !stepped.at.Before(got.at) {
		t.Errorf("c-older started at %s before c-newer stopped at %s", got.at.Format(time.StampMicro), stepped.at.Format(time.StampMicro))
	}
	if h := leaseHolder(t, ts, "coordinated"); h != "c-older" {
		t.Errorf("holder = %q, want c-older (oldest emulation version)", h)
	}
	cands, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1beta1().LeaseCandidates("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(cands.Items) != 2 {
		t.Fatalf("LeaseCandidates: %v, %v; want c-newer and c-older", cands, err)
	}
	for _, p := range []*runProc{newer, older} {
		p.signal(t, syscall.SIGTERM)
	}
	if code := newer.wait(t, 10*time.Second); code != 0 {
		t.Errorf("standby c-newer exit code = %d, want 0", code)
	}
	if code := older.wait(t, 10*time.Second); code != 42 {
		t.Errorf("leader c-older exit code = %d, want 42", code)
	}
	checkAtMostOne(t, file)
	cands, err = clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1beta1().LeaseCandidates("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(cands.Items) != 0 {
		t.Errorf("LeaseCandidates after exit: %d, %v; want none (removed on exit)", len(cands.Items), err)
	}
}

// testRunHandover: setting preferredHolder on a plainly elected lease (as
// an operator would with kubectl patch) makes the holder stop its child and
// release, and the preferred standby takes over ahead of the other one.
func testRunHandover(t *testing.T, e runEnv) {
	ts := startServer(t)
	file := filepath.Join(t.TempDir(), "records")
	procs := map[string]*runProc{}
	for _, id := range []string{"h1", "h2", "h3"} {
		procs[id] = e.start(t, id, file, []string{"--server", ts.URL, "--lease", "handover"})
	}
	first := waitRecord(t, file, 10*time.Second, "first start", func(r record) bool { return r.kind == "start" })
	preferred := "h3"
	if first.id == preferred {
		preferred = "h1"
	}
	// Validation wants a strategy next to preferredHolder; the election
	// controller leaves a lease with a strategy it does not implement alone
	// (with OldestEmulationVersion it would clear a preferredHolder that
	// names no LeaseCandidate).
	patch := []byte(`{"spec":{"strategy":"example.com/manual","preferredHolder":"` + preferred + `"}}`)
	askedAt := time.Now()
	_, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("default").Patch(context.Background(), "handover", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch preferredHolder: %v", err)
	}
	next := waitRecord(t, file, 5*time.Second, "next start", func(r record) bool { return r.kind == "start" && r.id != first.id })
	t.Logf("handover to the preferred holder took %v", next.at.Sub(askedAt).Round(time.Millisecond))
	if next.id != preferred {
		t.Errorf("%s took over, want the preferred %s", next.id, preferred)
	}
	// The first child stopped: its own stop record, or, when a loaded
	// machine kept its shell from running the SIGTERM trap within the
	// 0.5 s grace and it was killed, its runner's log says so.
	eventually(t, stopRecordWait, "the first child stopped", func() (bool, string) {
		for _, r := range readRecords(t, file) {
			if r.kind == "stop" && r.id == first.id {
				return true, ""
			}
		}
		return procs[first.id].logEntry("Stopped the child") != nil, "records:\n" + dumpRecords(t, file)
	})
	if h := leaseHolder(t, ts, "handover"); h != preferred {
		t.Errorf("holder = %q, want %q", h, preferred)
	}
	for _, p := range procs {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		p.wait(t, 10*time.Second)
	}
	checkAtMostOne(t, file)
}

// testRunExitCodes: the child's own exit code is leasehold run's, with
// --on-exit release (lease freed), keep (lease kept) and rerun.
func testRunExitCodes(t *testing.T, e runEnv) {
	ts := startServer(t)
	base := []string{"--server", ts.URL}
	p := e.start(t, "x-release", "", append(base, "--lease", "exit-release"), "sh", "-c", "exit 7")
	if code := p.wait(t, 10*time.Second); code != 7 {
		t.Errorf("exit code = %d, want the child's 7", code)
	}
	if h := leaseHolder(t, ts, "exit-release"); h != "" {
		t.Errorf("holder after --on-exit release = %q, want \"\"", h)
	}
	p = e.start(t, "x-keep", "", append(base, "--lease", "exit-keep", "--on-exit", "keep"), "sh", "-c", "kill -TERM $$")
	if code := p.wait(t, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code of a child killed by SIGTERM = %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if h := leaseHolder(t, ts, "exit-keep"); h != "x-keep" {
		t.Errorf("holder after --on-exit keep = %q, want x-keep", h)
	}
	file := filepath.Join(t.TempDir(), "reruns")
	p = e.start(t, "x-rerun", "", append(base, "--lease", "exit-rerun", "--on-exit", "rerun"), "sh", "-c", `echo "$LEASEHOLD_LEASE_TRANSITIONS" >> "$0"; exit 3`, file)
	eventually(t, 5*time.Second, "three runs", func() (bool, string) {
		data, _ := os.ReadFile(file)
		return strings.Count(string(data), "\n") >= 3, string(data)
	})
	p.signal(t, syscall.SIGTERM)
	p.wait(t, 5*time.Second)
	if data, _ := os.ReadFile(file); !strings.HasPrefix(string(data), "0\n0\n0\n") {
		t.Errorf("reruns saw tokens %q, want the same term (0) each time", data)
	}
	p = e.start(t, "x-missing", "", append(base, "--lease", "exit-missing"), "/nonexistent/program")
	if code := p.wait(t, 10*time.Second); code != 127 {
		t.Errorf("exit code for a missing program = %d, want 127", code)
	}
}

// testRunFlags: the safety rule is enforced and explained.
func testRunFlags(t *testing.T) {
	code, _, errOut := runCLI(t, "run", "--lease", "x", "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms", "--grace-period", "1s", "--", "true")
	if code != 2 || !strings.Contains(errOut, "must be less than --lease-duration") {
		t.Errorf("deadline + grace = lease duration: exit %d, stderr %q; want 2 and the rule", code, errOut)
	}
	code, _, errOut = runCLI(t, "run", "--lease", "x", "--lease-duration", "2500ms", "--", "true")
	if code != 2 || !strings.Contains(errOut, "whole number of seconds") {
		t.Errorf("fractional lease duration: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "run", "--lease", "x")
	if code != 2 || !strings.Contains(errOut, "no COMMAND") {
		t.Errorf("missing command: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runCLI(t, "run", "--help")
	help := out + errOut
	if code != 0 || !strings.Contains(help, "renew-deadline + grace-period < lease-duration") || !strings.Contains(help, "LEASEHOLD_GRACE_PERIOD") {
		t.Errorf("run --help: exit %d, output %q", code, help)
	}
	code, _, errOut = runCLI(t, "leader")
	if code != 2 || !strings.Contains(errOut, "--lease is required") {
		t.Errorf("leader without --lease: exit %d, stderr %q", code, errOut)
	}
}
