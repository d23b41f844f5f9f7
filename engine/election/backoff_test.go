package election

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// TestFailingModuleBacksOff: a failing module is called once per lease,
// then not on that lease within its backoff window, while elections of
// its leases proceed by the fallback (which does not preempt); loading
// another version of the module calls it at once, and a working one
// takes over.
func TestFailingModuleBacksOff(t *testing.T) {
	t.Parallel()
	const name = "example.com/flaky"
	opts := fastOptions()
	opts.FailureBackoff = time.Hour // longer than the test, on any machine
	v1 := &counting{name: name, sha: "01", fail: true}
	reg := NewStaticRegistry(NativeOldest, v1)
	opts.Registry = reg
	env := newEnv(t, opts)
	a := env.joinWith("a", "kcm", "1.31.0", "1.31.0", name)
	a.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "a leads by fallback", a.leading.Load)
	if n := v1.calls.Load(); n != 1 {
		t.Fatalf("failing module called %d times for one lease, want 1", n)
	}

	// A better candidate of the same lease needs a decision, which the
	// fallback makes without calling v1 (and without preempting a).
	backedOff := env.c.stats.backedOff.Load()
	b := env.joinWith("b", "kcm", "1.30.0", "1.30.0", name)
	b.elect.Store(true)
	env.eventually(3*time.Second, "decision on b without the module", func() bool {
		return env.c.stats.backedOff.Load() > backedOff
	})
	// Another lease has its own window: v1 is called once for it.
	env.joinWith("x", "sched", "1.30.0", "1.30.0", name)
	env.eventually(3*time.Second, "other lease granted by fallback", func() bool { return env.holder("sched") == "x" })
	if n := v1.calls.Load(); n != 2 {
		t.Fatalf("failing module called %d times for two leases within their windows, want 2", n)
	}
	if l := env.lease("sched"); l.Annotations[AnnotationFallbackFrom] != name {
		t.Errorf("other lease annotations = %v", l.Annotations)
	}
	if h, p := env.holder("kcm"), env.preferred("kcm"); h != "a" || p != "" {
		t.Errorf("fallback preempted: holder %q, preferredHolder %q", h, p)
	}
	st := env.c.Stats()
	if st.StrategyErrors != 2 || st.Fallbacks < 3 || st.BackedOff < 1 {
		t.Errorf("stats = %+v; want 2 strategy errors, 3 fallbacks and a backed-off call (leasehold_election_backed_off_total)", st)
	}
	for _, lease := range []string{"kcm", "sched"} {
		if n := countAction(env.settledDecisions(lease), "strategy-error"); n != 1 {
			t.Errorf("%s: strategy-error recorded %d times, want once per incident", lease, n)
		}
	}
	if n := env.c.backoff.leases(); n != 2 {
		t.Errorf("%d leases with a backoff window, want 2", n)
	}

	// Another version resets the backoff: called at once on each lease,
	// though failing, and then backs off again.
	v2 := &counting{name: name, sha: "02", fail: true}
	reg.Set(name, v2)
	env.c.Resync()
	env.eventually(2*time.Second, "new version called on both leases", func() bool { return v2.calls.Load() >= 2 })
	backedOff = env.c.stats.backedOff.Load()
	env.c.Resync()
	env.eventually(2*time.Second, "both leases decided again", func() bool { return env.c.stats.backedOff.Load() >= backedOff+2 })
	if n := v2.calls.Load(); n != 2 {
		t.Errorf("new failing version called %d times, want once per lease", n)
	}
	// A working version: b, better, takes over through preferredHolder.
	v3 := &counting{name: name, sha: "03"}
	reg.Set(name, v3)
	env.c.Resync()
	env.eventually(5*time.Second, "b leads by the working module", b.leading.Load)
	if v1.calls.Load() != 2 {
		t.Errorf("old version called again: %d", v1.calls.Load())
	}
	env.eventually(2*time.Second, "windows closed by the working module", func() bool { return env.c.backoff.leases() == 0 })
}

// TestModuleBackoffWindow: the window doubles with each failure after the
// previous one ended, up to the limit, and restarts on success or for
// another module under the same name; windows of different leases are
// independent, and forgetting a lease drops its windows.
func TestModuleBackoffWindow(t *testing.T) {
	t.Parallel()
	b := newModuleBackoff(5*time.Second, 20*time.Second)
	s := &counting{name: "x", sha: "01"}
	k, other := leaseKey{"ns", "one"}, leaseKey{"ns", "two"}
	t0 := time.Unix(1000, 0)
	errTrap := errors.New("trap")
	if b.blocked(k, s, t0) != nil {
		t.Fatal("blocked before any failure")
	}
	for i, want := range []time.Duration{5, 10, 20, 20} {
		if got := b.failed(k, s, errTrap, t0); got != want*time.Second {
			t.Fatalf("failure %d: window %v, want %v", i+1, got, want*time.Second)
		}
		if err := b.blocked(k, s, t0.Add(want*time.Second-time.Millisecond)); !errors.Is(err, errTrap) {
			t.Fatalf("failure %d: blocked = %v inside the window", i+1, err)
		}
		if b.active(other, s, t0) {
			t.Fatalf("failure %d on one lease blocks the module on another", i+1)
		}
		t0 = t0.Add(want * time.Second)
		if b.blocked(k, s, t0) != nil {
			t.Fatalf("failure %d: still blocked when the window ended", i+1)
		}
	}
	b.succeeded(k, s)
	if got := b.failed(k, s, errTrap, t0); got != 5*time.Second {
		t.Errorf("window after success %v, want 5s", got)
	}
	if b.active(k, &counting{name: "x", sha: "02"}, t0) {
		t.Error("another version of the module is blocked")
	}
	if b.active(k, s, t0) {
		t.Error("a reload of another version did not reset the backoff")
	}
	b.failed(k, s, errTrap, t0)
	b.failed(other, s, errTrap, t0)
	b.forget(k)
	if b.active(k, s, t0) || !b.active(other, s, t0) || b.leases() != 1 {
		t.Errorf("forget(%v): active here %v, on the other lease %v, %d leases", k, b.active(k, s, t0), b.active(other, s, t0), b.leases())
	}
}

// poisoned decides like Oldest, except that the input of one lease makes
// it time out (as a module whose parser loops on one candidate's labels).
type poisoned struct {
	lease string
	calls atomic.Int64
}

func (*poisoned) Name() string { return "example.com/poisoned" }
func (*poisoned) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: "example.com/poisoned", Version: "1.0.0", SHA256: "bad1"}
}
func (p *poisoned) Decide(ctx context.Context, in *abi.Input) (*abi.Decision, error) {
	p.calls.Add(1)
	if in.Lease.Name == p.lease {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return Oldest(in), nil
}

// TestModuleTimeoutOnOneLeaseOnly: a module that times out on one lease's
// input backs off on that lease only. The other lease keeps being decided
// by the module itself, which the fallback's refusal to preempt makes
// visible: a better candidate joining it is preferred at once.
func TestModuleTimeoutOnOneLeaseOnly(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	// Long enough that a healthy call, descheduled on a loaded machine,
	// does not time out too; the poisoned one costs it once.
	opts.DecideTimeout = 500 * time.Millisecond
	opts.FailureBackoff = time.Hour
	strat := &poisoned{lease: "poison"}
	opts.Registry = NewStaticRegistry(NativeOldest, strat)
	env := newEnv(t, opts)
	name := strat.Name()
	p := env.joinWith("p-new", "poison", "1.31.0", "1.31.0", name)
	p.elect.Store(true)
	h := env.joinWith("h-new", "healthy", "1.31.0", "1.31.0", name)
	h.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "poisoned lease led by fallback", p.leading.Load)
	env.eventually(3*time.Second, "healthy lease led", h.leading.Load)
	if l := env.lease("poison"); l.Annotations[AnnotationFallbackFrom] != name {
		t.Errorf("poisoned lease not granted by the fallback: %v", l.Annotations)
	}
	if l := env.lease("healthy"); l.Annotations[AnnotationFallbackFrom] != "" || l.Annotations[AnnotationStrategy] != name {
		t.Errorf("healthy lease not granted by the module: %v", l.Annotations)
	}
	if !env.c.backoff.active(leaseKey{testNS, "poison"}, strat, env.c.now()) {
		t.Error("module not backing off on the lease it timed out on")
	}

	// Better candidates join both leases: the module prefers the healthy
	// lease's newcomer, the fallback leaves the poisoned lease's holder.
	hOld := env.joinWith("h-old", "healthy", "1.30.0", "1.30.0", name)
	hOld.elect.Store(true)
	pOld := env.joinWith("p-old", "poison", "1.30.0", "1.30.0", name)
	pOld.elect.Store(true)
	env.eventually(5*time.Second, "module hands the healthy lease over", hOld.leading.Load)
	backedOff := env.c.stats.backedOff.Load()
	pOld.renewCandidate(context.Background()) // one more decision on the poisoned lease
	env.eventually(3*time.Second, "poisoned lease decided without the module", func() bool {
		return env.c.stats.backedOff.Load() > backedOff
	})
	if hp, pp := env.holder("poison"), env.preferred("poison"); hp != "p-new" || pp != "" {
		t.Errorf("poisoned lease: holder %q, preferredHolder %q: the fallback preempted", hp, pp)
	}
	if n := env.c.Stats().StrategyErrors; n != 1 {
		t.Errorf("%d strategy errors, want the one timeout", n)
	}
	recs := env.settledDecisions("healthy")
	if n := countAction(recs, "strategy-error"); n != 0 {
		t.Errorf("healthy lease recorded %d strategy errors", n)
	}
	var preferred bool
	for _, r := range recs {
		if r.Fallback {
			t.Errorf("healthy lease decided by the fallback: %+v", r)
		}
		preferred = preferred || r.Action == "prefer" && r.Chosen == "h-old" && r.Module.Name == name
	}
	if !preferred {
		t.Errorf("healthy lease history lacks the module's prefer: %+v", recs)
	}
	poison := env.settledDecisions("poison")
	if n := countAction(poison, "strategy-error"); n != 1 || !strings.Contains(poison[0].Reason, "DecideTimeout") {
		t.Errorf("poisoned lease history: %d strategy errors, first %+v", n, poison[0])
	}
}
