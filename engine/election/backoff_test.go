package election

import (
	"errors"
	"testing"
	"time"
)

// TestFailingModuleBacksOff: a failing module is called once, then not
// within its backoff window, while elections of its leases proceed by
// the fallback (which does not preempt); loading another version of the
// module calls it at once, and a working one takes over.
func TestFailingModuleBacksOff(t *testing.T) {
	const name = "example.com/flaky"
	opts := fastOptions()
	opts.FailureBackoff = 30 * time.Second // longer than the test, even on slow CI
	v1 := &counting{name: name, sha: "01", fail: true}
	reg := NewStaticRegistry(NativeOldest, v1)
	opts.Registry = reg
	env := newEnv(t, opts)
	a := env.joinWith("a", "kcm", "1.31.0", "1.31.0", name)
	a.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "a leads by fallback", a.leading.Load)

	// A better candidate of the same lease, and another lease: both need
	// decisions, which the fallback makes without calling v1.
	b := env.joinWith("b", "kcm", "1.30.0", "1.30.0", name)
	b.elect.Store(true)
	env.joinWith("x", "sched", "1.30.0", "1.30.0", name)
	env.eventually(3*time.Second, "other lease granted by fallback", func() bool { return env.holder("sched") == "x" })
	time.Sleep(700 * time.Millisecond)
	if n := v1.calls.Load(); n != 1 {
		t.Fatalf("failing module called %d times within its backoff window, want 1", n)
	}
	if l := env.lease("sched"); l.Annotations[AnnotationFallbackFrom] != name {
		t.Errorf("other lease annotations = %v", l.Annotations)
	}
	if h, p := env.holder("kcm"), env.preferred("kcm"); h != "a" || p != "" {
		t.Errorf("fallback preempted: holder %q, preferredHolder %q", h, p)
	}
	st := env.c.Stats()
	if st.StrategyErrors != 1 || st.Fallbacks < 3 || env.c.stats.backedOff.Load() < 2 {
		t.Errorf("stats = %+v, backed off %d", st, env.c.stats.backedOff.Load())
	}
	if n := countAction(env.settledDecisions("kcm"), "strategy-error"); n != 1 {
		t.Errorf("strategy-error recorded %d times, want once per incident", n)
	}

	// Another version resets the backoff: called at once, though failing.
	v2 := &counting{name: name, sha: "02", fail: true}
	reg.Set(name, v2)
	env.c.Resync()
	env.eventually(2*time.Second, "new version called", func() bool { return v2.calls.Load() > 0 })
	time.Sleep(300 * time.Millisecond)
	if n := v2.calls.Load(); n != 1 {
		t.Errorf("new failing version called %d times, want 1", n)
	}
	// A working version: b, better, takes over through preferredHolder.
	v3 := &counting{name: name, sha: "03"}
	reg.Set(name, v3)
	env.c.Resync()
	env.eventually(5*time.Second, "b leads by the working module", b.leading.Load)
	if v1.calls.Load() != 1 {
		t.Errorf("old version called again: %d", v1.calls.Load())
	}
}

// TestModuleBackoffWindow: the window doubles with each failure after the
// previous one ended, up to the limit, and restarts on success or for
// another module under the same name.
func TestModuleBackoffWindow(t *testing.T) {
	b := newModuleBackoff(5*time.Second, 20*time.Second)
	s := &counting{name: "x", sha: "01"}
	t0 := time.Unix(1000, 0)
	errTrap := errors.New("trap")
	if b.blocked(s, t0) != nil {
		t.Fatal("blocked before any failure")
	}
	for i, want := range []time.Duration{5, 10, 20, 20} {
		if got := b.failed(s, errTrap, t0); got != want*time.Second {
			t.Fatalf("failure %d: window %v, want %v", i+1, got, want*time.Second)
		}
		if err := b.blocked(s, t0.Add(want*time.Second-time.Millisecond)); !errors.Is(err, errTrap) {
			t.Fatalf("failure %d: blocked = %v inside the window", i+1, err)
		}
		t0 = t0.Add(want * time.Second)
		if b.blocked(s, t0) != nil {
			t.Fatalf("failure %d: still blocked when the window ended", i+1)
		}
	}
	b.succeeded(s)
	if got := b.failed(s, errTrap, t0); got != 5*time.Second {
		t.Errorf("window after success %v, want 5s", got)
	}
	if b.active(&counting{name: "x", sha: "02"}, t0) {
		t.Error("another version of the module is blocked")
	}
	if b.active(s, t0) {
		t.Error("a reload of another version did not reset the backoff")
	}
}
