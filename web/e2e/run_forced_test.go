package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web/client/run"
	"github.com/leasehold/leasehold/web/ui"
)

// forcedReleases is how many forced releases TestE2ERunForcedRelease
// makes; LEASEHOLD_E2E_FORCED_RELEASES raises it for a measurement.
func forcedReleases(t *testing.T) int {
	n := 12
	if s := os.Getenv("LEASEHOLD_E2E_FORCED_RELEASES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("LEASEHOLD_E2E_FORCED_RELEASES=%q: want a positive count", s)
		}
		n = v
	}
	return n
}

// TestE2ERunForcedRelease: three "leasehold run" processes on one lease,
// whose holder is cleared again and again behind its back, as the web UI's
// Force release does (a merge patch holderIdentity: null). No two children
// may ever run at once: the holder stops its child as soon as its lease
// watch shows the change, and the runner that takes the lease starts its
// child only once the old holder's lease would have run out. Some rounds
// clear the holder a second time right after a runner took the lease,
// before its child could start. Then the graceful way: asking the holder
// to step down (the UI's annotation) hands over without that wait.
func TestE2ERunForcedRelease(t *testing.T) {
	t.Parallel() // waits on real lease durations, no CPU-bound check
	if run.AnnotationStepDown != ui.AnnotationStepDown {
		t.Fatalf("the runner honours %q but the UI sets %q", run.AnnotationStepDown, ui.AnnotationStepDown)
	}
	dir := t.TempDir()
	e := newRunEnv(t, dir)
	ts := startServer(t)
	file := filepath.Join(dir, "records")
	const lease = "forced"
	leaseURL := ts.URL + "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + lease
	procs := map[string]*runProc{}
	for _, id := range []string{"f1", "f2", "f3"} {
		procs[id] = e.start(t, id, file, []string{"--server", ts.URL, "--lease", lease})
	}
	patch := func(body any) time.Time {
		t.Helper()
		at := time.Now()
		if code, out := uiRequest(t, "PATCH", leaseURL, "application/merge-patch+json", body); code != http.StatusOK {
			t.Fatalf("patch %v: HTTP %d %s", body, code, out)
		}
		return at
	}
	startAfter := func(at time.Time, what string) record {
		return waitRecord(t, file, 4*runLease, what, func(r record) bool { return r.kind == "start" && r.at.After(at) })
	}

	last := waitRecord(t, file, 10*time.Second, "first start", func(r record) bool { return r.kind == "start" })
	n := forcedReleases(t)
	var toChild, toStop []time.Duration
	for i := range n {
		// Anywhere between two renewals of the holder, after its first.
		time.Sleep(runRetry + rand.N(2*runRetry))
		holder := last.id
		at := patch(map[string]any{"spec": map[string]any{"holderIdentity": nil}})
		if i%4 == 3 {
			// Again, once a runner took the lease and waits out the old
			// holder's: its child must not start either until then.
			eventually(t, 2*runLease, "a runner takes the freed lease", func() (bool, string) {
				h := leaseHolder(t, ts, lease)
				return h != "", "holder " + strconv.Quote(h)
			})
			patch(map[string]any{"spec": map[string]any{"holderIdentity": nil}})
		}
		next := startAfter(at, fmt.Sprintf("start after forced release %d", i+1))
		toStop = append(toStop, lastRecord(t, file, holder, next.at).Sub(at))
		if i%4 != 3 {
			toChild = append(toChild, next.at.Sub(at))
		}
		last = next
	}
	runs := checkAtMostOne(t, file)
	for _, d := range toChild {
		// The wait is the old holder's lease from its last renewal (at
		// most a retry period and a half before the release) plus a tenth.
		if d < runLease-2*runRetry || d > 2*runLease {
			t.Errorf("a new child started %v after a forced release, want about the lease duration %v", d, runLease)
		}
	}
	for _, d := range toStop {
		if d > runDeadline {
			t.Errorf("the old holder's child wrote %v after the release: not stopped by its lease watch", d)
		}
	}
	t.Logf("%d forced releases, %d child runs, 0 overlaps; time to the new child (single releases, %d s leases): %s; the old child's last record after: %s",
		n, len(runs), runLease/time.Second, spread(toChild), spread(toStop))

	// Asking the holder to step down: it stops its child and releases,
	// and another runner starts at once.
	time.Sleep(2 * runRetry)
	holder := last.id
	at := patch(map[string]any{"metadata": map[string]any{"annotations": map[string]any{run.AnnotationStepDown: holder}}})
	next := startAfter(at, "start after the step-down")
	if next.id == holder {
		t.Errorf("%s stepped down and took the lease back before the others", holder)
	}
	if d := next.at.Sub(at); d > runLease-runRetry {
		t.Errorf("the next child started %v after a step-down, want well within a lease duration (no wait)", d)
	} else {
		t.Logf("step-down: the next child started after %v", d.Round(time.Millisecond))
	}
	for _, p := range procs {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		p.wait(t, 10*time.Second)
	}
	checkAtMostOne(t, file)
}

// spread is "min/median/max" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %v / median %v / max %v", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
}

// lastRecord is the time of id's last record before the given time: its
// child's "stop", or its last "tick" when it was killed without one.
func lastRecord(t *testing.T, file, id string, before time.Time) time.Time {
	t.Helper()
	var last time.Time
	for _, r := range readRecords(t, file) {
		if r.id == id && r.at.Before(before) && r.at.After(last) {
			last = r.at
		}
	}
	return last
}
