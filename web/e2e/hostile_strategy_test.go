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

const selectiveStrategy = "example.com/selective"

// selectiveWAT builds example.com/selective, one module whose answer
// depends on the lease it is asked about:
//
//   - lease st-poison: it spins until the host cuts it off (its input
//     makes it time out, as a parser looping on one candidate's data);
//   - lease st-healthy: it ranks its candidates h-old before h-new, with
//     preemption, naming only those present;
//   - lease st-loyal: it ranks only l-dead, the first holder, whether or
//     not l-dead still answers: well-formed, and once l-dead dies, a
//     ranking that would never elect anybody;
//   - anything else (the self-test samples among them): it abstains.
//
// Candidates are recognized by `"name":"<name>"` in the input, which only
// candidate entries (and the lease itself) carry.
func selectiveWAT() string {
	type segment struct {
		name, text string
		addr       int
	}
	var segs []segment
	next := 1024
	add := func(name, text string) {
		segs = append(segs, segment{name, text, next})
		next += (len(text) + 63) / 64 * 64
	}
	prefer := func(preempt bool, names ...string) string {
		return `{"ranking":["` + strings.Join(names, `","`) + `"],"action":"prefer","preempt":` + strconv.FormatBool(preempt) +
			`,"reason":"ranked ` + strings.Join(names, " ") + `"}`
	}
	add("info", `{"name":"`+selectiveStrategy+`","version":"1"}`)
	add("abstain", `{"ranking":[],"action":"abstain","preempt":false,"reason":"not a lease of this test"}`)
	add("poison", `"name":"st-poison"`)
	add("ldead", `"name":"l-dead"`)
	add("hold", `"name":"h-old"`)
	add("hnew", `"name":"h-new"`)
	add("loyal", prefer(false, "l-dead"))
	add("both", prefer(true, "h-old", "h-new"))
	add("oldonly", prefer(true, "h-old"))
	add("newonly", prefer(true, "h-new"))
	if next > 65536 {
		panic("selectiveWAT: data past the first page")
	}
	ref := map[string]string{}
	var data strings.Builder
	for _, s := range segs {
		ref[s.name] = fmt.Sprintf("(i32.const %d) (i32.const %d)", s.addr, len(s.text))
		fmt.Fprintf(&data, "  (data (i32.const %d) %s)\n", s.addr, strconv.Quote(s.text))
	}
	// The input is read to the second and third pages.
	return `(module
  (import "lease_strategy" "read_input" (func $read_input (param i32 i32) (result i32)))
  (import "lease_strategy" "write_output" (func $write_output (param i32 i32)))
  (memory (export "memory") 3)
` + data.String() + `
  (global $n (mut i32) (i32.const 0))
  (func (export "lease_strategy_abi_version") (result i32) (i32.const 1))
  (func (export "lease_strategy_info") (result i32) (call $out ` + ref["info"] + `))
  (func $out (param $p i32) (param $l i32) (result i32)
    (call $write_output (local.get $p) (local.get $l))
    (i32.const 0))
  ;; has reports whether the input holds the l bytes at p.
  (func $has (param $p i32) (param $l i32) (result i32) (local $i i32) (local $j i32)
    (block $done
      (loop $scan
        (br_if $done (i32.gt_u (i32.add (local.get $i) (local.get $l)) (global.get $n)))
        (local.set $j (i32.const 0))
        (block $mismatch
          (loop $cmp
            (br_if $mismatch (i32.ne (i32.load8_u (i32.add (i32.const 65536) (i32.add (local.get $i) (local.get $j))))
                                     (i32.load8_u (i32.add (local.get $p) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $cmp (i32.lt_u (local.get $j) (local.get $l))))
          (return (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const 0))
  (func (export "lease_strategy_decide") (result i32)
    (global.set $n (call $read_input (i32.const 65536) (i32.const 131072)))
    (if (i32.gt_u (global.get $n) (i32.const 131072)) (then (return (call $out ` + ref["abstain"] + `))))
    (if (call $has ` + ref["poison"] + `) (then (loop $spin (br $spin))))
    (if (call $has ` + ref["ldead"] + `) (then (return (call $out ` + ref["loyal"] + `))))
    (if (call $has ` + ref["hold"] + `) (then
      (if (call $has ` + ref["hnew"] + `) (then (return (call $out ` + ref["both"] + `))))
      (return (call $out ` + ref["oldonly"] + `))))
    (if (call $has ` + ref["hnew"] + `) (then (return (call $out ` + ref["newonly"] + `))))
    (call $out ` + ref["abstain"] + `)))`
}

// TestE2EHostileStrategyIsolation runs one real WebAssembly module on
// three leases. It times out on one lease's input, and keeps deciding the
// others itself: the healthy lease is handed over by the module's
// preemption, which the fallback never does. On the third lease it ranks
// only the holder, which then dies: the ranking would leave the lease
// vacant until the dead candidate is pinged again a minute later, but the
// controller counts it as a strategy failure and the fallback grants the
// live candidate within about a lease duration of the lease expiring.
func TestE2EHostileStrategyIsolation(t *testing.T) {
	t.Parallel()
	plugins := t.TempDir()
	sum := installPlugin(t, plugins, "selective.wasm", watToWasm(t, selectiveWAT()))
	// The default deadline: a healthy decision (a fresh instance, a scan
	// of the input) must fit in it on a loaded machine; the poisoned lease
	// costs the election worker one such deadline per backoff window.
	ts := startServer(t, "--plugins-dir", plugins, "--plugin-timeout", "1s")
	if m, ok := servingModule(t, ts, selectiveStrategy); !ok || !m.Active || m.SHA256 != sum {
		t.Fatalf("selective module not serving: %+v (log:\n%s)", m, ts.Log())
	}
	ctx := context.Background()
	cs := clientset(t, restConfig(t, ts, wireJSON))
	leases := cs.CoordinationV1().Leases("kube-system")
	module := selectiveStrategy + "@1 sha256:" + sum
	lease := func(name string) (holder string, annotations map[string]string) {
		t.Helper()
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get lease %s: %v", name, err)
		}
		return deref(l.Spec.HolderIdentity), l.Annotations
	}
	history := func(name string) (errors, fallbacks int, text string) {
		recs := leaseDecisions(t, ts, name)
		for _, r := range recs {
			if r.Action == "strategy-error" {
				errors++
			}
			if r.Fallback {
				fallbacks++
			}
		}
		return errors, fallbacks, fmt.Sprintf("%+v", recs)
	}

	healthy, poison, loyal := &leaderTracker{leading: map[string]bool{}}, &leaderTracker{leading: map[string]bool{}},
		&leaderTracker{leading: map[string]bool{}}
	startMember(t, ts, healthy, "st-healthy", "h-new", "1.33.0", "1.33.0", selectiveStrategy)
	startMember(t, ts, poison, "st-poison", "p-new", "1.33.0", "1.33.0", selectiveStrategy)
	dead := startMember(t, ts, loyal, "st-loyal", "l-dead", "1.33.0", "1.33.0", selectiveStrategy)
	for _, lt := range []*leaderTracker{healthy, poison, loyal} {
		waitLeader(t, lt, 1, 30*time.Second)
	}
	if _, a := lease("st-poison"); a["leasehold.dev/election-fallback-from"] != selectiveStrategy {
		t.Fatalf("st-poison not granted by the fallback after the module timed out: %v", a)
	}
	eventually(t, 10*time.Second, "st-poison's timeout recorded", func() (bool, string) {
		errs, _, text := history("st-poison")
		return errs > 0 && strings.Contains(text, "timed out"), text
	})
	for _, name := range []string{"st-healthy", "st-loyal"} {
		if _, a := lease(name); a["leasehold.dev/elected-by-module"] != module || a["leasehold.dev/election-fallback-from"] != "" {
			t.Errorf("%s not granted by the module after it timed out on st-poison: %v", name, a)
		}
	}

	// The module keeps deciding st-healthy: h-old joins, the module asks
	// h-new to step down, and h-old leads.
	startMember(t, ts, healthy, "st-healthy", "h-old", "1.32.0", "1.32.0", selectiveStrategy)
	if who := waitLeader(t, healthy, 2, 30*time.Second); who != "h-old" {
		t.Fatalf("st-healthy's second leader = %s, want h-old", who)
	}
	if h, a := lease("st-healthy"); h != "h-old" || a["leasehold.dev/elected-by-module"] != module ||
		a["leasehold.dev/election-fallback-from"] != "" {
		t.Errorf("st-healthy after the hand-over: holder %s, annotations %v", h, a)
	}
	if errs, fallbacks, text := history("st-healthy"); errs != 0 || fallbacks != 0 {
		t.Errorf("st-healthy's decisions touched by st-poison's timeout: %s", text)
	}
	// Meanwhile st-poison's holder was never preempted by a fallback.
	startMember(t, ts, poison, "st-poison", "p-old", "1.32.0", "1.32.0", selectiveStrategy)
	if h, _ := lease("st-poison"); h != "p-new" {
		t.Errorf("st-poison's holder = %s, want p-new", h)
	}

	// st-loyal: l-live joins and answers; l-dead dies.
	startMember(t, ts, loyal, "st-loyal", "l-live", "1.32.0", "1.32.0", selectiveStrategy)
	cands := cs.CoordinationV1beta1().LeaseCandidates("kube-system")
	eventually(t, 10*time.Second, "l-live's LeaseCandidate", func() (bool, string) {
		_, err := cands.Get(ctx, "l-live", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	dead.kill()
	killed := time.Now()
	if who := waitLeader(t, loyal, 2, 30*time.Second); who != "l-live" {
		t.Fatalf("st-loyal's second leader = %s, want l-live", who)
	}
	took := time.Since(killed)
	// The lease expires up to cleLeaseDuration after the kill; a grant
	// after that takes GrantAckWait (1 s), a ping and an ack. Without the
	// progress check the dead holder is pinged again only after a minute.
	t.Logf("st-loyal: l-live leads %v after l-dead died (lease duration %v)", took.Round(time.Millisecond), cleLeaseDuration)
	if limit := 3 * cleLeaseDuration; took > limit {
		t.Errorf("st-loyal: l-live led %v after l-dead died, want under %v", took, limit)
	}
	if h, a := lease("st-loyal"); h != "l-live" || a["leasehold.dev/election-fallback-from"] != selectiveStrategy {
		t.Errorf("st-loyal after the failover: holder %s, annotations %v", h, a)
	}
	eventually(t, 10*time.Second, "st-loyal's progress failure recorded", func() (bool, string) {
		_, _, text := history("st-loyal")
		return strings.Contains(text, "elects nobody on a vacant lease") && strings.Contains(text, "while l-live did"), text
	})
	if _, overlap := loyal.snapshot(); len(overlap) > 0 {
		t.Errorf("st-loyal leadership overlaps: %q", overlap)
	}
}
