package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/testneeds"
)

const newestStrategy = "example.com/newest-binary-version"

// newestWasm builds the Go example strategy from source once per test
// process (seconds, even with a warm build cache), as its README says.
var newestWasm = sync.OnceValues(func() ([]byte, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, fmt.Errorf("go toolchain not in PATH (%w): install Go 1.26 from https://go.dev/dl", err)
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	// go test's result cache only sees files this process opens: read the
	// sources the external build compiles, so editing them reruns the test.
	for _, g := range []string{"plugins/examples/newest-binary-version/*.go", "plugins/sdk/*.go", "plugins/abi/*.go"} {
		paths, _ := filepath.Glob(filepath.Join(root, g))
		for _, p := range paths {
			_, _ = os.ReadFile(p)
		}
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("leasehold-e2e-newest-%d.wasm", os.Getpid()))
	defer os.Remove(out)
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./plugins/examples/newest-binary-version")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build example: %w\n%s", err, b)
	}
	return os.ReadFile(out)
})

// installPlugin drops a module into the plugins directory as an operator
// should: written under a dot name (ignored by the scanner, same file
// system) and renamed, so the server never reads half a file.
func installPlugin(t *testing.T, dir, name string, wasm []byte) string {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(wasm))
}

// uiGet decodes one of the UI's JSON endpoints.
func uiGet(t *testing.T, ts *testServer, path string, v any) {
	t.Helper()
	if code, _, body := httpGet(t, ts.URL+path); code != http.StatusOK || json.Unmarshal([]byte(body), v) != nil {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
}

// pluginModule and decisionRecord decode the fields the tests read of the
// UI's JSON (web/ui.Module, engine/history.DecisionRecord): the server is a black
// box here.
type pluginModule struct {
	Name, SHA256, LastError string
	Builtin, Active         bool
	Calls, Errors           uint64
}

type decisionRecord struct {
	Strategy, Chosen, Action, Reason string
	Fallback                         bool
	Module                           struct {
		Name, SHA256 string
		Builtin      bool
	}
}

func moduleStatus(t *testing.T, ts *testServer, name string) (pluginModule, bool) {
	var st struct{ Modules []pluginModule }
	uiGet(t, ts, "/ui/api/v1/system", &st)
	for _, m := range st.Modules {
		if m.Name == name && !m.Builtin {
			return m, true
		}
	}
	return pluginModule{}, false
}

// servingModule waits for the first scan of the plugins directory to serve
// the module of strategy name (the server is ready before the scan ends:
// the directory's modules load in the background) and returns its status;
// ok is false if it never served within a minute.
func servingModule(t *testing.T, ts *testServer, name string) (m pluginModule, ok bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if m, ok = moduleStatus(t, ts, name); (ok && m.Active) || time.Now().After(deadline) {
			return m, ok
		}
	}
}

func leaseDecisions(t *testing.T, ts *testServer, lease string) []decisionRecord {
	var d struct{ Items []decisionRecord }
	uiGet(t, ts, "/ui/api/v1/namespaces/kube-system/leases/"+lease+"/decisions", &d)
	return d.Items
}

// TestE2EElectionPluginsHotSwap: three candidates elect the oldest with
// the built-in strategy; the Go example module is dropped into the
// running server's plugins directory and the candidates are pointed at
// it; the newest binary then leads, handed over through preferredHolder,
// with the module's name and digest on the lease. No restart anywhere.
func TestE2EElectionPluginsHotSwap(t *testing.T) {
	testneeds.Slow(t, "builds a Go guest for wasip1")
	t.Parallel()    // mostly lease timers
	go newestWasm() // overlap the slow build with the first election
	plugins := t.TempDir()
	ts := startServer(t, "--plugins-dir", plugins)
	ctx := context.Background()
	cs := clientset(t, restConfig(t, ts, wireJSON))
	leases := cs.CoordinationV1().Leases("kube-system")
	lt := &leaderTracker{leading: map[string]bool{}}
	const lease = "e2e-swap"
	// kcm-old has the oldest emulation version, kcm-new the newest binary.
	members := [][3]string{{"kcm-old", "1.31.0", "1.30.0"}, {"kcm-mid", "1.32.0", "1.32.0"}, {"kcm-new", "1.33.0", "1.31.0"}}
	for _, v := range members {
		startMember(t, ts, lt, lease, v[0], v[1], v[2], string(coordinationv1.OldestEmulationVersion))
	}
	if who := waitLeader(t, lt, 1, 20*time.Second); who != "kcm-old" {
		t.Fatalf("first leader = %s, want kcm-old (oldest emulation version)", who)
	}

	wasm, err := newestWasm()
	if err != nil {
		t.Fatal(err)
	}
	sum := installPlugin(t, plugins, "newest-binary-version.wasm", wasm)
	eventually(t, time.Minute, "example module loaded", func() (bool, string) {
		m, ok := moduleStatus(t, ts, newestStrategy)
		return ok && m.Active && m.SHA256 == sum, fmt.Sprintf("%+v", m)
	})

	// The operator rolls the new strategy out by patching spec.strategy of
	// the running components' LeaseCandidates (kubectl patch leasecandidate
	// ...): client-go only writes the strategy when it creates its object
	// and then just renews it, so restarting a component under the same
	// identity would keep the old strategy, and new identities would leave
	// stale candidates behind for 30 minutes. The components' own flags are
	// changed too in real life, for when their object is ever recreated.
	cands := cs.CoordinationV1beta1().LeaseCandidates("kube-system")
	patch := []byte(`{"spec":{"strategy":"` + newestStrategy + `"}}`)
	for _, v := range members {
		if _, err := cands.Patch(ctx, v[0], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch candidate %s: %v", v[0], err)
		}
	}
	// The live holder is asked to step down (preferredHolder) and kcm-new
	// is granted the lease once kcm-old lets it go.
	eventually(t, 20*time.Second, "kcm-new leads", func() (bool, string) {
		starts, _ := lt.snapshot()
		return len(starts) >= 2, strings.Join(starts, ",")
	})
	if starts, overlap := lt.snapshot(); len(overlap) > 0 || strings.Join(starts, ",") != "kcm-old,kcm-new" {
		t.Fatalf("leadership starts %q, overlaps %q; want kcm-old then kcm-new", starts, overlap)
	}
	l, err := leases.Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantModule := newestStrategy + "@1.0.0 sha256:" + sum
	if got := l.Annotations["leasehold.dev/elected-by-module"]; got != wantModule ||
		l.Annotations["leasehold.dev/elected-by-strategy"] != newestStrategy ||
		l.Annotations["leasehold.dev/election-fallback-from"] != "" ||
		l.Spec.Strategy == nil || string(*l.Spec.Strategy) != newestStrategy || deref(l.Spec.HolderIdentity) != "kcm-new" {
		t.Errorf("lease after the swap: spec %+v annotations %v; want module %q", l.Spec, l.Annotations, wantModule)
	}
	var preferred, granted bool
	for _, r := range leaseDecisions(t, ts, lease) {
		byModule := r.Module.Name == newestStrategy && r.Module.SHA256 == sum && !r.Fallback
		preferred = preferred || (r.Action == "prefer" && r.Chosen == "kcm-new" && byModule)
		granted = granted || (r.Action == "grant" && r.Chosen == "kcm-new" && byModule)
	}
	if !preferred || !granted {
		t.Errorf("decision history lacks the module's prefer+grant to kcm-new: %+v", leaseDecisions(t, ts, lease))
	}
}

// hostileWAT is one module, example.com/hostile, that answers like a
// polite abstainer on every input without the marker, which includes the
// self-test samples (lease kube-system/kube-controller-manager), so that
// it loads; on a lease named hostile-<mode> it misbehaves by the mode's
// first letter: loop, memory bomb, trap, junk output. The bomb writes into
// every 8 MiB it gets and, once the host's page cap refuses more, reads
// past the end, so its error (unlike the trap's) shows it hit the cap.
const hostileWAT = `(module
  (import "lease_strategy" "read_input" (func $read_input (param i32 i32) (result i32)))
  (import "lease_strategy" "write_output" (func $write_output (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"name\":\"example.com/hostile\",\"version\":\"1\"}")
  (data (i32.const 2048) "{\"ranking\":[],\"action\":\"abstain\",\"preempt\":false,\"reason\":\"ok\"}")
  (data (i32.const 3072) "\"name\":\"hostile-")
  (data (i32.const 3200) "<<junk>>")
  (func (export "lease_strategy_abi_version") (result i32) (i32.const 1))
  (func (export "lease_strategy_info") (result i32)
    (call $write_output (i32.const 1024) (i32.const 44))
    (i32.const 0))
  ;; mode returns the byte after the marker in the input (read at 8192), or 0.
  (func $mode (result i32) (local $n i32) (local $i i32) (local $j i32)
    (local.set $n (call $read_input (i32.const 8192) (i32.const 57344)))
    (if (i32.gt_u (local.get $n) (i32.const 57344)) (then (return (i32.const 0))))
    (loop $scan
      (if (i32.ge_u (i32.add (local.get $i) (i32.const 16)) (local.get $n)) (then (return (i32.const 0))))
      (local.set $j (i32.const 0))
      (block $mismatch
        (loop $cmp
          (br_if $mismatch (i32.ne (i32.load8_u (i32.add (i32.const 8192) (i32.add (local.get $i) (local.get $j))))
                                   (i32.load8_u (i32.add (i32.const 3072) (local.get $j)))))
          (local.set $j (i32.add (local.get $j) (i32.const 1)))
          (br_if $cmp (i32.lt_u (local.get $j) (i32.const 16))))
        (return (i32.load8_u (i32.add (i32.const 8208) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $scan))
    (i32.const 0))
  (func (export "lease_strategy_decide") (result i32) (local $m i32)
    (local.set $m (call $mode))
    (if (i32.eq (local.get $m) (i32.const 108)) (then (loop $spin (br $spin))))
    (if (i32.eq (local.get $m) (i32.const 109)) (then
      (loop $grow
        (if (i32.eq (memory.grow (i32.const 128)) (i32.const -1)) (then
          (drop (i32.load (i32.mul (memory.size) (i32.const 65536))))))
        (i32.store (i32.mul (i32.sub (memory.size) (i32.const 1)) (i32.const 65536)) (i32.const 1))
        (br $grow))))
    (if (i32.eq (local.get $m) (i32.const 116)) (then unreachable))
    (if (i32.eq (local.get $m) (i32.const 106)) (then
      (call $write_output (i32.const 3200) (i32.const 8))
      (return (i32.const 0))))
    (call $write_output (i32.const 2048) (i32.const 63))
    (i32.const 0)))`

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func watToWasm(t *testing.T, src string) []byte {
	t.Helper()
	testneeds.Wat2wasm(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command("wat2wasm", in, "-o", out).CombinedOutput()
	if err == nil {
		b, err = os.ReadFile(out)
	}
	if err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	return b
}

// TestE2EElectionPluginsHostile: candidates of four leases declare a
// strategy whose module loops, exhausts memory, traps or answers junk.
// Every election still happens through the built-in fallback, which never
// preempts a live holder, the failures are recorded, and the API stays
// responsive throughout.
func TestE2EElectionPluginsHostile(t *testing.T) {
	t.Parallel()
	plugins := t.TempDir()
	sum := installPlugin(t, plugins, "hostile.wasm", watToWasm(t, hostileWAT))
	// A short deadline so that the loop costs the single election worker
	// little; loaded at start-up (the hot-drop path is the test above).
	ts := startServer(t, "--plugins-dir", plugins, "--plugin-timeout", "200ms")
	if m, ok := servingModule(t, ts, "example.com/hostile"); !ok || !m.Active || m.SHA256 != sum {
		t.Fatalf("hostile module not serving: %+v (log:\n%s)", m, ts.Log())
	}
	ctx := context.Background()
	leases := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system")

	// The API must answer all along: /readyz and a lease list every 50 ms.
	var probeFail atomic.Value
	var slowest atomic.Int64
	var probes sync.WaitGroup
	probeCtx, stopProbe := context.WithCancel(ctx)
	probes.Go(func() {
		client := &http.Client{Timeout: 5 * time.Second}
		for probeCtx.Err() == nil {
			for _, p := range []string{"/readyz", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"} {
				start := time.Now()
				resp, err := client.Get(ts.URL + p)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				if err != nil && probeCtx.Err() == nil {
					probeFail.CompareAndSwap(nil, p+": "+err.Error())
				}
				slowest.Store(max(slowest.Load(), int64(time.Since(start))))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	// lease -> what its strategy error says. The bomb normally hits the
	// page cap within the deadline; on a starved or -race machine zeroing
	// 64 MiB can take longer, and the deadline cutting it off is as good.
	modes := map[string]string{
		"hostile-loop": "timed out", "hostile-memory": "out of bounds memory access|timed out",
		"hostile-trap": "unreachable", "hostile-junk": "not a valid document",
	}
	trackers, holders := map[string]*leaderTracker{}, map[string]*cleMember{}
	for lease := range modes {
		trackers[lease] = &leaderTracker{leading: map[string]bool{}}
		// The newest starts alone and gets the lease from the fallback...
		holders[lease] = startMember(t, ts, trackers[lease], lease, lease+"-new", "1.33.0", "1.33.0", "example.com/hostile")
	}
	for lease, lt := range trackers {
		waitLeader(t, lt, 1, 20*time.Second)
		// ...then two older ones join: the built-in would ask the holder to
		// step down, a fallback decision must not.
		startMember(t, ts, lt, lease, lease+"-mid", "1.32.0", "1.32.0", "example.com/hostile")
		startMember(t, ts, lt, lease, lease+"-old", "1.31.0", "1.31.0", "example.com/hostile")
	}
	before, _ := moduleStatus(t, ts, "example.com/hostile")
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
		for lease := range modes {
			l, err := leases.Get(ctx, lease, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if l.Spec.PreferredHolder != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != lease+"-new" {
				t.Fatalf("%s: live holder %s preempted after a strategy failure: holder %v, preferredHolder %v",
					lease, lease+"-new", deref(l.Spec.HolderIdentity), deref(l.Spec.PreferredHolder))
			}
		}
	}

	// The module failed and was cut off. After a failure the controller
	// backs the module off on that lease (5 s, doubling) and lets the
	// fallback decide there without calling it.
	if after, _ := moduleStatus(t, ts, "example.com/hostile"); after.Errors == 0 {
		t.Fatalf("the hostile module never failed: %d/%d calls/errors before the window, %d/%d after",
			before.Calls, before.Errors, after.Calls, after.Errors)
	}

	// The holders die: the fallback elects the oldest remaining candidate.
	for _, m := range holders {
		m.kill()
	}
	failedTotal := 0
	for lease, lt := range trackers {
		if who := waitLeader(t, lt, 2, 15*time.Second); who != lease+"-old" {
			t.Errorf("%s: leader after failover = %s, want %s-old", lease, who, lease)
		}
		if starts, overlap := lt.snapshot(); len(overlap) > 0 {
			t.Errorf("%s: leadership starts %q, overlaps %q", lease, starts, overlap)
		}
		l, err := leases.Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Annotations["leasehold.dev/election-fallback-from"] != "example.com/hostile" ||
			l.Annotations["leasehold.dev/elected-by-strategy"] != string(coordinationv1.OldestEmulationVersion) ||
			!strings.HasSuffix(l.Annotations["leasehold.dev/elected-by-module"], "(builtin)") {
			t.Errorf("%s: annotations after a fallback grant: %v", lease, l.Annotations)
		}
		var failed, grants int
		for _, r := range leaseDecisions(t, ts, lease) {
			switch {
			case r.Action == "strategy-error" && regexp.MustCompile(modes[lease]).MatchString(r.Reason) && strings.Contains(r.Reason, sum):
				failed++
			case r.Action == "grant" && r.Fallback && r.Module.Builtin && r.Strategy == "example.com/hostile":
				grants++
			case r.Action == "prefer" || r.Action == "grant":
				t.Errorf("%s: decision not made by the fallback: %+v", lease, r)
			}
		}
		failedTotal += failed
		if grants < 2 {
			t.Errorf("%s: history has %d fallback grants (want >=2): %+v", lease, grants, leaseDecisions(t, ts, lease))
		}
	}
	if failedTotal == 0 {
		t.Errorf("no lease's history records a strategy error naming the module's failure")
	}

	stopProbe()
	probes.Wait()
	if f := probeFail.Load(); f != nil {
		t.Errorf("API request failed while hostile modules ran: %v", f)
	}
	if d := time.Duration(slowest.Load()); d > 2*time.Second {
		t.Errorf("slowest API request took %v while hostile modules ran", d)
	}
	if code, _, body := httpGet(t, ts.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the hostile modules = %d %s", code, body)
	}
	// Cut off, counted, and still loaded: a module is never disabled, the
	// failures stay per decision.
	if m, ok := moduleStatus(t, ts, "example.com/hostile"); !ok || !m.Active || m.Errors == 0 || m.LastError == "" {
		t.Errorf("hostile module status = %+v", m)
	}
}
