package election

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// counting is Oldest under another name, counting its calls; with fail
// set it traps instead, like a broken module.
type counting struct {
	name, sha string
	fail      bool
	calls     atomic.Int64
}

func (s *counting) Name() string { return s.name }
func (s *counting) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: s.name, Version: "1.0.0", SHA256: s.sha}
}
func (s *counting) Decide(_ context.Context, in *abi.Input) (*abi.Decision, error) {
	s.calls.Add(1)
	if s.fail {
		return nil, errors.New("module trapped")
	}
	return Oldest(in), nil
}

// TestRenewalsReuseTheDecision: a holder renewing every 100 ms costs no
// strategy call and no history record; a joining candidate, the lease
// expiring and a Resync each make a fresh decision.
func TestRenewalsReuseTheDecision(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	strat := &counting{name: "example.com/counting", sha: "c0ffee"}
	opts.Registry = NewStaticRegistry(NativeOldest, strat)
	env := newEnv(t, opts)
	a := env.joinWith("a", "kcm", "1.30.0", "1.31.0", strat.name)
	// Renewals that keep the lease live through a starved second or two
	// (the race detector beside 2 CPU burners): with 2 s, a gap between
	// two of them let it expire, and that is a fresh decision.
	a.leaseDur.Store(60)
	a.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "a leads", a.leading.Load)
	// Let a's ack age past the ping window: that state change alone may
	// cost one more decision, made by the first reconcile that starts
	// after it. Two reuses after the ack aged mean that one is over: the
	// second reconcile began after the first had ended.
	time.Sleep(opts.PingWindow)
	reused := env.c.stats.reused.Load()
	env.eventually(2*time.Second, "renewals after the ack aged", func() bool { return env.c.stats.reused.Load() >= reused+2 })

	calls, recs, renews := strat.calls.Load(), len(env.decisions("kcm")), a.renewedOnce.Load()
	reused = env.c.stats.reused.Load()
	env.eventually(2*time.Second, "three renewals", func() bool {
		return a.renewedOnce.Load() >= renews+3 && env.c.stats.reused.Load() >= reused+3
	})
	if got := strat.calls.Load(); got != calls {
		t.Errorf("strategy called %d times during renewals only", got-calls)
	}
	if got := len(env.decisions("kcm")); got != recs {
		t.Errorf("%d history records added during renewals only", got-recs)
	}

	// A worse candidate joins: decided afresh, the holder stays.
	env.joinWith("b", "kcm", "1.31.0", "1.31.0", strat.name)
	env.eventually(2*time.Second, "decision on the joining candidate", func() bool { return strat.calls.Load() > calls })
	if h, p := env.holder("kcm"), env.preferred("kcm"); h != "a" || p != "" {
		t.Errorf("holder %q, preferredHolder %q", h, p)
	}

	// A module reload (Resync) decides afresh.
	time.Sleep(2 * opts.PingWindow)
	calls = strat.calls.Load()
	env.c.Resync()
	env.eventually(2*time.Second, "decision after Resync", func() bool { return strat.calls.Load() > calls })

	// Expiry still fires: a stops renewing, the lease is re-granted.
	a.leaseDur.Store(1)
	env.eventually(2*time.Second, "a renewal for 1 s", func() bool {
		return derefI32(env.lease("kcm").Spec.LeaseDurationSeconds) == 1
	})
	calls, grants := strat.calls.Load(), env.c.Stats().Grants
	a.elect.Store(false)
	env.eventually(4*time.Second, "expired lease re-granted", func() bool { return env.c.Stats().Grants > grants })
	if strat.calls.Load() == calls {
		t.Error("expired lease re-granted on a reused decision")
	}
}

// TestReuseBounds: a decision is reused only on a live lease, within
// ResyncPeriod and until the next Resync.
func TestReuseBounds(t *testing.T) {
	t.Parallel()
	strat := &counting{name: "example.com/counting", sha: "c0ffee"}
	c := newEnv(t, fastOptions()).c
	now := time.Now()
	m := &memo{incidents: map[string]string{}}
	lv := leaseView{exists: true, obj: &coordinationv1.Lease{}, live: true, holder: "a"}
	key := c.decisionKey(strat, lv, nil, nil, m, now)
	m.last = &lastDecision{key: key, at: now, resyncs: c.resyncs.Load(), live: true}
	if _, ok := c.reusable(leaseKey{testNS, "l"}, m, strat, key, lv, now); !ok {
		t.Fatal("fresh decision not reusable")
	}
	if _, ok := c.reusable(leaseKey{testNS, "l"}, m, strat, key, leaseView{exists: true, obj: lv.obj, holder: "a"}, now); ok {
		t.Error("decision reused on an expired lease")
	}
	if _, ok := c.reusable(leaseKey{testNS, "l"}, m, strat, key, lv, now.Add(DefaultResyncPeriod)); ok {
		t.Error("decision reused after ResyncPeriod")
	}
	other := &counting{name: strat.name, sha: "beef"}
	if k2 := c.decisionKey(other, lv, nil, nil, m, now); k2 == key {
		t.Error("another module version has the same decision key")
	}
	c.Resync()
	if _, ok := c.reusable(leaseKey{testNS, "l"}, m, strat, key, lv, now); ok {
		t.Error("decision reused after Resync")
	}
}
