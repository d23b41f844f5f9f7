package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// The first second of a coordinated election (issue 20): three candidates
// that start together get the best one leading at once, at first start and
// after a server restart, without the lowest-ranked one being granted
// first and the best one a lease duration later; a better candidate that
// appears takes over; a dead holder is replaced one lease duration later.
// Each test logs the measured times ("first-second:" lines); the bounds it
// asserts are loose (the targets are 1.5 s to the first leader and
// lease duration + 0.5 s to re-election, which the logs show), so that the
// tests hold on a loaded 2-core machine.

// fsLoose bounds "at once" in these tests: well under the lease duration a
// wasted grant costs (4 s leases, 5 s controller grants), well over what
// a loaded machine needs.
const fsLoose = 3500 * time.Millisecond

// fsFirstLeader bounds the first leader after candidates start together.
// A wasted first grant shows as the wrong first leader (checked apart);
// this bound only catches a controller that waited a whole grant cycle
// (5 s grant + 4 s lease), and leaves room for starting three processes
// on a machine loaded by other tests (3.7 s seen under two CPU burners).
const fsFirstLeader = 2 * fsLoose

// fsMember is one of the three candidates, in the order they start: the
// worst-ranked first, so that a controller that grants to the first
// candidate it sees picks the wrong one.
var fsMembers = []struct{ id, bin, emu string }{
	{"m-132", "1.32.0", "1.32.0"}, {"m-131", "1.32.0", "1.31.0"}, {"m-130", "1.32.0", "1.30.0"},
}

// fsLog prints one measurement in a form that is easy to grep.
func fsLog(t *testing.T, what string, d time.Duration) {
	t.Helper()
	t.Logf("first-second: %s: %v", what, d.Round(time.Millisecond))
}

// nextLeader polls lt (every 2 ms, for the timestamp) until leadership start
// number n and returns who and when.
func nextLeader(t *testing.T, lt *leaderTracker, n int, timeout time.Duration) (string, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		starts, _ := lt.snapshot()
		if len(starts) >= n {
			return starts[n-1], time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leadership start number %d within %v; starts: %q", n, timeout, starts)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killServer ends ts with SIGKILL (no shutdown) and restarts it on the same
// data directory and port; it returns the new server and when it was
// started.
func killAndRestart(t *testing.T, ts *testServer, down time.Duration) (*testServer, time.Time) {
	t.Helper()
	ts.stopOnce.Do(func() {}) // killed, not stopped: no exit-code check
	ts.proc.kill()
	if down > 0 {
		time.Sleep(down) // the outage being measured, not a wait for a condition
	}
	started := time.Now()
	ts2 := startServerIn(t, ts.DataDir, "--listen", strings.TrimPrefix(ts.URL, "http://"))
	if ts2.URL != ts.URL {
		t.Fatalf("restarted on %s, want %s", ts2.URL, ts.URL)
	}
	return ts2, started
}

// TestE2EFirstSecondClientGo measures client-go's coordinated elector (4 s
// leases, 0.5 s retry period) against the server's election controller.
func TestE2EFirstSecondClientGo(t *testing.T) {
	testneeds.Slow(t, "coordinated elections with real lease durations")
	t.Parallel() // mostly waiting on lease timers
	ts := startServer(t)
	const lease = "e2e-first-second"
	observer := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system")
	lt := &leaderTracker{leading: map[string]bool{}}
	strategy := string(coordinationv1.OldestEmulationVersion)

	// 1. Three candidates start together: m-130 (oldest emulation) leads
	// first, and quickly.
	start := time.Now()
	members := map[string]*cleMember{}
	for _, m := range fsMembers {
		members[m.id] = startMember(t, ts, lt, lease, m.id, m.bin, m.emu, strategy)
	}
	who, at := nextLeader(t, lt, 1, 20*time.Second)
	fsLog(t, "client-go: first leader after three candidates start ("+who+")", at.Sub(start))
	if who != "m-130" {
		t.Errorf("first leader = %s, want the best candidate m-130 (decisions: %s)", who, decisionSummary(t, ts, "kube-system", lease))
	}
	if d := at.Sub(start); d > fsFirstLeader {
		t.Errorf("first leader after %v, want well under a grant cycle (decisions: %s)", d, decisionSummary(t, ts, "kube-system", lease))
	}

	// 2. Server restart (SIGKILL, restarted at once) under the running
	// candidates: the best one keeps or regains the lease.
	ts, restarted := killAndRestart(t, ts, 0)
	observer = clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system")
	eventually(t, 20*time.Second, "m-130 holds the lease and leads after the restart", func() (bool, string) {
		l, err := observer.Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return deref(l.Spec.HolderIdentity) == "m-130" && lt.isLeading("m-130"), "holder " + deref(l.Spec.HolderIdentity)
	})
	fsLog(t, "client-go: best candidate leading after a server restart (SIGKILL, restarted at once)", time.Since(restarted))
	starts, _ := lt.snapshot()
	fsLog(t, fmt.Sprintf("client-go: leadership starts so far %q; restart cost", starts), 0)

	// 3. A better candidate appears: the holder steps down for it.
	n := len(starts)
	appeared := time.Now()
	members["m-129"] = startMember(t, ts, lt, lease, "m-129", "1.32.0", "1.29.0", strategy)
	who, at = nextLeader(t, lt, n+1, 20*time.Second)
	fsLog(t, "client-go: hand-over to a better candidate that appeared ("+who+")", at.Sub(appeared))
	if who != "m-129" {
		t.Errorf("after m-129 joined, %s started leading; want m-129", who)
	}
	// m-130 stepped down: its LeaderElector.Run returned, and a component
	// exits then (client-go's elector leads once). Its candidate goes with
	// it, or the controller would keep granting to a candidate that acks
	// pings but has no elector left to confirm.
	members["m-130"].kill()

	// 4. The holder dies (its network is cut: no renewal, no release): the
	// next best still running, m-131, leads one lease duration later.
	time.Sleep(time.Second) // let m-129 renew as a settled holder, as a real one would
	members["m-129"].kill()
	killed := time.Now()
	who, at = nextLeader(t, lt, n+2, 20*time.Second)
	fsLog(t, "client-go: re-election after the holder died ("+who+", 4 s leases)", at.Sub(killed))
	if who != "m-131" {
		t.Errorf("after m-129 died, %s started leading; want m-131", who)
	}
	if d := at.Sub(killed); d > cleLeaseDuration+fsLoose {
		t.Errorf("re-election took %v, want about the lease duration %v", d, cleLeaseDuration)
	}
	if _, overlap := lt.snapshot(); len(overlap) > 0 {
		t.Errorf("two leaders at once: %q", overlap)
	}
}

// TestE2EFirstSecondRun measures "leasehold run --candidate" the same way
// (4 s leases, 3 s renew deadline, 0.5 s retry period).
func TestE2EFirstSecondRun(t *testing.T) {
	testneeds.Slow(t, "coordinated elections with real lease durations")
	t.Parallel()
	dir := t.TempDir()
	e := newRunEnv(t, dir)
	ts := startServer(t)
	file := filepath.Join(dir, "records")
	const lease = "first-second"
	flags := func(emulation string) []string {
		return []string{"--server", ts.URL, "--lease", lease, "--candidate", "--binary-version", "1.32.0",
			"--emulation-version", emulation, "--lease-duration", "4s", "--renew-deadline", "3s"}
	}
	starts := func() []record {
		var out []record
		for _, r := range readRecords(t, file) {
			if r.kind == "start" {
				out = append(out, r)
			}
		}
		return out
	}
	// nthStart waits for the n-th start record (1-based) and returns it.
	nthStart := func(n int, timeout time.Duration) record {
		t.Helper()
		waitRecord(t, file, timeout, fmt.Sprintf("start number %d", n), func(record) bool { return len(starts()) >= n })
		return starts()[n-1]
	}

	// 1. Three runners start together.
	procs := map[string]*runProc{}
	begin := time.Now()
	for _, m := range fsMembers {
		procs[m.id] = e.start(t, m.id, file, flags(m.emu))
	}
	first := nthStart(1, 20*time.Second)
	fsLog(t, "run --candidate: first leader after three runners start ("+first.id+")", first.at.Sub(begin))
	// The best of candidates that start together gets the first grant
	// when they register within the first grant's wait (300 ms from the
	// first): on a loaded machine m-130 registered after the decision
	// (CI, m-132 led first). That and how soon are timing targets; the
	// best holding in the end is checked below (step 2).
	if first.id != "m-130" {
		timingTarget(t, false, "first leader = %s, want the best candidate m-130 (decisions: %s)", first.id, decisionSummary(t, ts, "default", lease))
	}
	d := first.at.Sub(begin)
	timingTarget(t, d <= fsFirstLeader, "first leader after %v, want well under a grant cycle", d)

	// 2. Server restart under the running runners.
	ts, restarted := killAndRestart(t, ts, 0)
	eventually(t, 20*time.Second, "m-130 holds the lease after the restart", func() (bool, string) {
		h := leaseHolder(t, ts, lease)
		return h == "m-130", "holder " + h
	})
	fsLog(t, "run --candidate: best candidate holding after a server restart", time.Since(restarted))

	// 2b. An outage longer than the renew deadline: the holder stops its
	// child. After the restart the controller, which cannot know when the
	// holder last renewed, waits one lease duration from the restart
	// before it re-grants; measured, not bounded.
	n := len(starts())
	ts, restarted = killAndRestart(t, ts, 3500*time.Millisecond)
	again := nthStart(n+1, 20*time.Second)
	fsLog(t, "run --candidate: leader again ("+again.id+") after a 3.5 s outage, from the restart", again.at.Sub(restarted))
	if again.id != "m-130" {
		t.Errorf("after the outage %s started; want m-130", again.id)
	}

	// 3. A better runner appears.
	n = len(starts())
	appeared := time.Now()
	procs["m-129"] = e.start(t, "m-129", file, flags("1.29.0"))
	next := nthStart(n+1, 20*time.Second)
	fsLog(t, "run --candidate: hand-over to a better runner that appeared ("+next.id+")", next.at.Sub(appeared))
	if next.id != "m-129" {
		t.Errorf("after m-129 joined, %s started; want m-129", next.id)
	}

	// 4. The holder's runner is killed with SIGKILL (its child dies with
	// it): the next best leads one lease duration later.
	time.Sleep(time.Second) // let m-129 renew as a settled holder, as a real one would
	if err := procs["m-129"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-procs["m-129"].done
	next = nthStart(n+2, 20*time.Second)
	fsLog(t, "run --candidate: re-election after the holder was killed ("+next.id+", 4 s leases)", next.at.Sub(killed))
	if next.id != "m-130" {
		t.Errorf("after m-129 died, %s started; want m-130", next.id)
	}
	for id, p := range procs {
		if id != "m-129" {
			p.signal(t, syscall.SIGTERM)
		}
	}
	for id, p := range procs {
		if id != "m-129" {
			p.wait(t, 10*time.Second)
		}
	}
	// No two children at once. (checkAtMostOne also wants the fencing
	// token to grow with every run, but a holder re-granted its own
	// expired lease keeps its token, as client-go's elector keeps
	// leaderTransitions when it re-acquires under its own identity.)
	runs := childRuns(t, readRecords(t, file))
	slices.SortFunc(runs, func(a, b childRun) int { return a.start.Compare(b.start) })
	for i := 1; i < len(runs); i++ {
		if prev, cur := runs[i-1], runs[i]; !cur.start.After(prev.last) {
			t.Errorf("two children at once: %s until %s, %s from %s", prev.id, prev.last.Format(time.StampMicro), cur.id, cur.start.Format(time.StampMicro))
		}
	}
}

// TestE2EFirstSecondPluginsLoaded: candidates of a strategy a module in
// the plugins directory implements are found in storage at a restart; the
// controller waits for the directory's first load instead of logging that
// no module implements the strategy, and /readyz/election-controller
// passes once it decides.
func TestE2EFirstSecondPluginsLoaded(t *testing.T) {
	testneeds.Slow(t, "coordinated elections with real lease durations")
	t.Parallel()
	wasm, err := newestWasm()
	if err != nil {
		t.Fatal(err)
	}
	plugins := t.TempDir()
	installPlugin(t, plugins, "newest-binary-version.wasm", wasm)
	ts := startServer(t, "--plugins-dir", plugins)
	const lease = "e2e-first-second-plugins"
	lt := &leaderTracker{leading: map[string]bool{}}
	startMember(t, ts, lt, lease, "p-old", "1.31.0", "1.30.0", newestStrategy)
	startMember(t, ts, lt, lease, "p-new", "1.33.0", "1.31.0", newestStrategy)
	// The bounds below are generous: the first decision waits for the
	// plugins directory's first load (a module compiled by wazero), which
	// took over 20 s once on a machine at load 30.
	if who := waitLeader(t, lt, 1, 60*time.Second); who != "p-new" {
		t.Fatalf("first leader = %s, want p-new (newest binary)", who)
	}
	logs := ts.Log()
	ts.Stop(t)
	ts2 := startServerIn(t, ts.DataDir, "--plugins-dir", plugins, "--listen", strings.TrimPrefix(ts.URL, "http://"))
	eventually(t, 40*time.Second, "/readyz/election-controller passes", func() (bool, string) {
		code, _, body := httpGet(t, ts2.URL+"/readyz/election-controller")
		return code == 200, body
	})
	// A decision after the restart: the holder's renewals are seen, so the
	// lease has been judged at least once by now.
	eventually(t, 30*time.Second, "p-new holds the lease after the restart", func() (bool, string) {
		h := leaseHolderIn(t, ts2, "kube-system", lease)
		return h == "p-new", "holder " + h
	})
	logs += ts2.Log()
	if strings.Contains(logs, "Not electing") {
		t.Errorf("the controller decided before the plugins directory loaded:\n%s", logs)
	}
	if body := decisionSummary(t, ts2, "kube-system", lease); strings.Contains(body, `"action":"abstain"`) {
		t.Errorf("abstention recorded: %s", body)
	}
}

// TestE2EFirstSecondMoveRace races real client-go coordinated electors'
// confirming renewals against the controller's move of their unconfirmed
// grant: on several leases at once, a worse candidate is granted the
// lease, and a better one registers at a varying delay after the grant,
// across the worse elector's retry period. Whichever write wins, nobody
// leads twice at once, and a candidate whose grant was moved (a
// successful "grant" recorded from it) never started leading: its
// confirming update lost the compare-and-swap.
func TestE2EFirstSecondMoveRace(t *testing.T) {
	testneeds.Slow(t, "coordinated elections with real lease durations")
	t.Parallel()
	ts := startServer(t)
	observer := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system")
	strategy := string(coordinationv1.OldestEmulationVersion)
	const trials = 6
	// Candidate names are unique in the namespace, so each trial has its
	// own pair.
	type trial struct {
		lease, worse, better string
		lt                   *leaderTracker
	}
	results := make(chan trial, trials)
	for i := range trials {
		go func() {
			tr := trial{lease: fmt.Sprintf("e2e-move-race-%d", i), worse: fmt.Sprintf("worse-%d", i), better: fmt.Sprintf("better-%d", i),
				lt: &leaderTracker{leading: map[string]bool{}}}
			defer func() { results <- tr }()
			startMember(t, ts, tr.lt, tr.lease, tr.worse, "1.32.0", "1.32.0", strategy)
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				if l, err := observer.Get(context.Background(), tr.lease, metav1.GetOptions{}); err == nil && deref(l.Spec.HolderIdentity) == tr.worse {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			// Spread the race over client-go's retry period (0.5 s, with
			// jitter up to 1.1 s): the varying delay is the experiment.
			time.Sleep(time.Duration(i) * 150 * time.Millisecond)
			startMember(t, ts, tr.lt, tr.lease, tr.better, "1.32.0", "1.30.0", strategy)
		}()
	}
	moved, confirmed := 0, 0
	for range trials {
		tr := <-results
		eventually(t, 20*time.Second, tr.lease+": better leads", func() (bool, string) {
			return tr.lt.isLeading(tr.better), fmt.Sprintf("%v; decisions %s", tr.lt.leading, decisionSummary(t, ts, "kube-system", tr.lease))
		})
		starts, overlap := tr.lt.snapshot()
		if len(overlap) > 0 {
			t.Errorf("%s: two leaders at once: %q", tr.lease, overlap)
		}
		body := decisionSummary(t, ts, "kube-system", tr.lease)
		var hist struct {
			Items []struct{ Action, Holder, Chosen, Reason, Outcome string }
		}
		if err := json.Unmarshal([]byte(body), &hist); err != nil {
			t.Fatalf("decisions of %s: %v: %s", tr.lease, err, body)
		}
		wasMoved := false
		for _, r := range hist.Items {
			if r.Action == "grant" && r.Holder == tr.worse && r.Chosen == tr.better && r.Outcome == "ok" &&
				strings.HasPrefix(r.Reason, "moved the grant "+tr.worse+" had not confirmed") {
				wasMoved = true
			}
		}
		leadWorse := slices.Contains(starts, tr.worse)
		switch {
		case wasMoved && leadWorse:
			t.Errorf("%s: the grant was moved away from worse, yet worse led: starts %q; decisions %s", tr.lease, starts, body)
		case wasMoved:
			moved++
		case leadWorse:
			confirmed++
		default:
			t.Errorf("%s: neither a move nor a confirmed worse leader: starts %q; decisions %s", tr.lease, starts, body)
		}
	}
	t.Logf("first-second: move race: %d moved before the holder confirmed, %d confirmed first (then handed over)", moved, confirmed)
}

// leaseHolderIn is the holder of lease ns/name, "" if none.
func leaseHolderIn(t *testing.T, ts *testServer, ns, name string) string {
	t.Helper()
	l, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return deref(l.Spec.HolderIdentity)
}

// decisionSummary is a lease's decision history as the UI serves it, for
// failure messages.
func decisionSummary(t *testing.T, ts *testServer, ns, lease string) string {
	t.Helper()
	_, _, body := httpGet(t, ts.URL+"/ui/api/v1/namespaces/"+ns+"/leases/"+lease+"/decisions")
	return body
}

// isLeading reports whether id leads now.
func (lt *leaderTracker) isLeading(id string) bool {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.leading[id]
}
