package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const waiterStrategy = "example.com/waiter"

// waiterWAT builds example.com/waiter: on a lease named wait-1… it spins
// on the monotonic clock for 1.5 s, on wait-2… for 2.5 s, then prefers the
// lease's one candidate, <lease>-a; on any other input (the self-test
// samples among them) it abstains at once, so that it loads quickly. The
// guest's monotonic clock is the host's real one (WithSysNanotime), so the
// wait lasts as long on the interpreter, under -race or on a slow machine
// as on the compiler.
func waiterWAT() string {
	data := func(addr int, s string) string {
		return fmt.Sprintf("(data (i32.const %d) %s)", addr, strconv.Quote(s))
	}
	info := `{"name":"` + waiterStrategy + `","version":"1"}`
	abstain := `{"ranking":[],"action":"abstain","preempt":false,"reason":"not a waiting lease"}`
	prefer := func(cand, wait string) string {
		return `{"ranking":["` + cand + `"],"action":"prefer","preempt":true,"reason":"decided after ` + wait + `"}`
	}
	d1, d2 := prefer("wait-1500-a", "1.5 s"), prefer("wait-2500-a", "2.5 s")
	const marker = `"name":"wait-`
	return `(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "lease_strategy" "read_input" (func $read_input (param i32 i32) (result i32)))
  (import "lease_strategy" "write_output" (func $write_output (param i32 i32)))
  (memory (export "memory") 2)
  ` + data(1024, info) + `
  ` + data(2048, abstain) + `
  ` + data(3072, marker) + `
  ` + data(3200, d1) + `
  ` + data(3456, d2) + `
  (func (export "lease_strategy_abi_version") (result i32) (i32.const 1))
  (func (export "lease_strategy_info") (result i32)
    (call $write_output (i32.const 1024) (i32.const ` + strconv.Itoa(len(info)) + `))
    (i32.const 0))
  ;; now reads the monotonic clock (WASI clock id 1) in nanoseconds.
  (func $now (result i64)
    (drop (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 0)))
    (i64.load (i32.const 0)))
  ;; wait spins until ns nanoseconds have passed.
  (func $wait (param $ns i64) (local $until i64)
    (local.set $until (i64.add (call $now) (local.get $ns)))
    (loop $spin (br_if $spin (i64.lt_u (call $now) (local.get $until)))))
  ;; mode returns the byte after the marker in the input (read at 8192), or 0.
  (func $mode (result i32) (local $n i32) (local $i i32) (local $j i32)
    (local.set $n (call $read_input (i32.const 8192) (i32.const 122880)))
    (if (i32.gt_u (local.get $n) (i32.const 122880)) (then (return (i32.const 0))))
    (loop $scan
      (if (i32.ge_u (i32.add (local.get $i) (i32.const ` + strconv.Itoa(len(marker)) + `)) (local.get $n)) (then (return (i32.const 0))))
      (local.set $j (i32.const 0))
      (block $mismatch
        (loop $cmp
          (br_if $mismatch (i32.ne (i32.load8_u (i32.add (i32.const 8192) (i32.add (local.get $i) (local.get $j))))
                                   (i32.load8_u (i32.add (i32.const 3072) (local.get $j)))))
          (local.set $j (i32.add (local.get $j) (i32.const 1)))
          (br_if $cmp (i32.lt_u (local.get $j) (i32.const ` + strconv.Itoa(len(marker)) + `))))
        (return (i32.load8_u (i32.add (i32.const ` + strconv.Itoa(8192+len(marker)) + `) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $scan))
    (i32.const 0))
  (func (export "lease_strategy_decide") (result i32) (local $m i32)
    (local.set $m (call $mode))
    (if (i32.eq (local.get $m) (i32.const 49)) (then
      (call $wait (i64.const 1500000000))
      (call $write_output (i32.const 3200) (i32.const ` + strconv.Itoa(len(d1)) + `))
      (return (i32.const 0))))
    (if (i32.eq (local.get $m) (i32.const 50)) (then
      (call $wait (i64.const 2500000000))
      (call $write_output (i32.const 3456) (i32.const ` + strconv.Itoa(len(d2)) + `))
      (return (i32.const 0))))
    (call $write_output (i32.const 2048) (i32.const ` + strconv.Itoa(len(abstain)) + `))
    (i32.const 0)))`
}

// TestE2EPluginTimeoutIsTheDecisionDeadline: --plugin-timeout is the one
// limit of a decision, at any value. Under --plugin-timeout 2s (twice the
// default) a module that takes 1.5 s is not cut off, and its decision is
// the one applied; a module that takes 2.5 s is cut off at 2 s, the error
// names that limit, and the built-in decides instead.
func TestE2EPluginTimeoutIsTheDecisionDeadline(t *testing.T) {
	t.Parallel()
	plugins := t.TempDir()
	sum := installPlugin(t, plugins, "waiter.wasm", watToWasm(t, waiterWAT()))
	ts := startServer(t, "--plugins-dir", plugins, "--plugin-timeout", "2s")
	if m, ok := servingModule(t, ts, waiterStrategy); !ok || !m.Active || m.SHA256 != sum {
		t.Fatalf("waiter module not serving: %+v (log:\n%s)", m, ts.Log())
	}
	ctx := context.Background()
	leases := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system")
	// One lease at a time: two decisions of one module at once could wait
	// for each other, and the wait would count against the deadline.
	member := func(lease string) {
		startMember(t, ts, &leaderTracker{leading: map[string]bool{}}, lease, lease+"-a", "1.31.0", "1.31.0", waiterStrategy)
	}
	member("wait-1500")
	granted := func(lease string) map[string]string {
		t.Helper()
		var annotations map[string]string
		eventually(t, 30*time.Second, lease+" granted", func() (bool, string) {
			l, err := leases.Get(ctx, lease, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			annotations = l.Annotations
			return deref(l.Spec.HolderIdentity) == lease+"-a", fmt.Sprintf("spec %+v annotations %v", l.Spec, l.Annotations)
		})
		return annotations
	}

	// 1.5 s under the 2 s limit: the module's own decision is applied.
	a := granted("wait-1500")
	if a["leasehold.dev/elected-by-strategy"] != waiterStrategy || a["leasehold.dev/election-fallback-from"] != "" ||
		a["leasehold.dev/elected-by-module"] != waiterStrategy+"@1 sha256:"+sum {
		t.Errorf("wait-1500 was not granted by the module: annotations %v; decisions %+v", a, leaseDecisions(t, ts, "wait-1500"))
	}
	// The decision is recorded just after the lease is written: wait for it.
	eventually(t, 15*time.Second, "wait-1500's grant recorded", func() (bool, string) {
		recs := leaseDecisions(t, ts, "wait-1500")
		for _, r := range recs {
			if r.Action == "grant" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", recs)
	})
	var applied bool
	for _, r := range leaseDecisions(t, ts, "wait-1500") {
		if r.Action == "strategy-error" || r.Fallback {
			t.Errorf("wait-1500: the 1.5 s module was cut off or bypassed: %+v", r)
		}
		applied = applied || (r.Action == "grant" && r.Chosen == "wait-1500-a" && r.Module.Name == waiterStrategy &&
			strings.Contains(r.Reason, "decided after 1.5 s"))
	}
	if !applied {
		t.Errorf("wait-1500: no grant by the module in %+v", leaseDecisions(t, ts, "wait-1500"))
	}

	// 2.5 s over the 2 s limit: cut off at 2 s, and the error says so.
	const limit = "no decision within 2s (the election's DecideTimeout)"
	member("wait-2500")
	a = granted("wait-2500")
	if a["leasehold.dev/election-fallback-from"] != waiterStrategy {
		t.Errorf("wait-2500 was not granted by the fallback: annotations %v", a)
	}
	eventually(t, 15*time.Second, "wait-2500's strategy error recorded", func() (bool, string) {
		recs := leaseDecisions(t, ts, "wait-2500")
		for _, r := range recs {
			if r.Action == "strategy-error" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", recs)
	})
	var cutOff bool
	for _, r := range leaseDecisions(t, ts, "wait-2500") {
		cutOff = cutOff || (r.Action == "strategy-error" && strings.Contains(r.Reason, "timed out: "+limit))
		if strings.Contains(r.Reason, "decided after 2.5 s") {
			t.Errorf("wait-2500: the 2.5 s module's answer was applied: %+v", r)
		}
	}
	if !cutOff {
		t.Errorf("wait-2500: no strategy error naming the 2s deadline in %+v", leaseDecisions(t, ts, "wait-2500"))
	}
	// Once its backoff ends the module may be tried (and cut off) again.
	if m, _ := moduleStatus(t, ts, waiterStrategy); m.Errors == 0 || !strings.Contains(m.LastError, limit) {
		t.Errorf("module status after the cut-off = %+v, want errors naming %q", m, limit)
	}
}
