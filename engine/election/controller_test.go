package election

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGrantOldestAckedCandidate(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	// Longer than the test: an expiry never re-grants the lease (a second
	// decision, triggered by the expiry) before the checks below.
	opts.GrantDuration = time.Minute
	env := newPatientEnv(t, opts)
	a := env.join("new", "kcm", "1.31.0", "1.31.0")
	b := env.join("old-emulation", "kcm", "1.30.0", "1.31.0")
	c := env.join("oldest", "kcm", "1.30.0", "1.30.0")
	env.run()
	env.eventually(3*time.Second, "lease granted", func() bool { return env.holder("kcm") == "oldest" })

	// Listed candidates carry no proof of life: each was pinged and acked.
	for _, m := range []*member{a, b, c} {
		if m.pings() == 0 {
			t.Errorf("candidate %s was not pinged", m.name)
		}
	}
	l := env.lease("kcm")
	s := l.Spec
	if derefI32(s.LeaseDurationSeconds) != int32(opts.GrantDuration/time.Second) || s.RenewTime == nil || s.AcquireTime == nil ||
		derefI32(s.LeaseTransitions) != 0 || s.Strategy == nil || *s.Strategy != abi.BuiltinStrategy || s.PreferredHolder != nil {
		t.Fatalf("granted lease spec = %+v", s)
	}
	if got := l.Annotations[AnnotationStrategy]; got != abi.BuiltinStrategy {
		t.Errorf("%s = %q", AnnotationStrategy, got)
	}
	if got := l.Annotations[AnnotationModule]; !strings.HasPrefix(got, "OldestEmulationVersion@native") {
		t.Errorf("%s = %q", AnnotationModule, got)
	}
	if got := l.Annotations[AnnotationReason]; !strings.Contains(got, "oldest") {
		t.Errorf("%s = %q", AnnotationReason, got)
	}
	if _, ok := l.Annotations[AnnotationFallbackFrom]; ok {
		t.Errorf("unexpected %s", AnnotationFallbackFrom)
	}
	managers := map[string]bool{}
	for _, mf := range l.ManagedFields {
		managers[mf.Manager] = true
	}
	if !managers[DefaultUserAgent] {
		t.Errorf("managedFields managers = %v, want %s", managers, DefaultUserAgent)
	}
	recs := env.settledDecisions("kcm")
	last := recs[len(recs)-1]
	if last.Action != "grant" || last.Chosen != "oldest" || last.Outcome != "ok" || len(last.Candidates) != 3 ||
		last.Trigger != string(abi.ReasonLeaseMissing) || last.Module.Name != abi.BuiltinStrategy ||
		strings.Join(last.Ranking, ",") != "oldest,old-emulation,new" {
		t.Fatalf("last decision = %+v", last)
	}
	for _, dc := range last.Candidates {
		// The best granted at once once it answered; the others may still
		// have had their ping outstanding.
		if dc.Name == "oldest" && !dc.Acked || dc.State != "acked" && dc.State != "pending" {
			t.Errorf("candidate %s in state %s in the record", dc.Name, dc.State)
		}
	}
	if st := env.c.Stats(); st.Grants == 0 || st.Pings < 3 || st.Decisions == 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestPingWithoutAckIsNotGranted(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	// Longer than the test on any machine: a re-ping seen below is one
	// the controller should not have sent, not a slow test.
	opts.UnresponsiveRetry = time.Hour
	env := newEnv(t, opts)
	silent := env.join("silent", "sched", "1.29.0", "1.29.0") // best, never acks
	silent.ack.Store(false)
	env.join("live", "sched", "1.30.0", "1.30.0")
	env.run()
	env.eventually(3*time.Second, "lease granted to the live candidate", func() bool { return env.holder("sched") == "live" })
	o, err := env.e.Get(context.Background(), env.cands, "silent", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	firstPing := o.(metav1.Object).GetResourceVersion()
	pinged := o.(*coordinationv1beta1.LeaseCandidate).Spec.PingTime
	if pinged == nil {
		t.Fatal("the silent candidate was never pinged")
	}
	// "live" does not renew the lease, so it expires every second and is
	// re-granted; the silent candidate is not re-pinged each round.
	grants := env.c.Stats().Grants
	env.eventually(3*time.Second, "two more rounds", func() bool { return env.c.Stats().Grants >= grants+2 })
	o, _ = env.e.Get(context.Background(), env.cands, "silent", &metav1.GetOptions{})
	if rv := o.(metav1.Object).GetResourceVersion(); rv != firstPing {
		t.Errorf("unresponsive candidate re-pinged within UnresponsiveRetry (rv %s -> %s)", firstPing, rv)
	}
	if env.holder("sched") != "live" {
		t.Errorf("holder = %q", env.holder("sched"))
	}
	// The first grant. Before it, when live answers later than
	// GrantAckWait (a loaded machine), nobody had answered in time: the
	// controller records that (no-candidate), and that the silent one did
	// not answer (unserved), and grants nothing.
	recs := env.settledDecisions("sched")
	first := slices.IndexFunc(recs, func(r history.DecisionRecord) bool { return r.Action == "grant" })
	if first < 0 {
		t.Fatalf("no grant recorded: %+v", recs)
	}
	for _, r := range recs[:first] {
		if r.Action != "no-candidate" && r.Action != "unserved" || r.Chosen != "" {
			t.Errorf("decision before the first grant: %s %q (%s)", r.Action, r.Chosen, r.Reason)
		}
	}
	grant := recs[first]
	// Stamped by the controller's clock, like the ping: no wall-clock
	// bound on the test's own scheduling. Once live answered, the better
	// candidate is awaited about twice live's ack time, never less than
	// quickAckFloor (planFor).
	if waited := grant.Time.Sub(pinged.Time); waited < quickAckFloor {
		t.Errorf("granted %v after the better candidate was pinged, before it had %v to answer", waited, quickAckFloor)
	}
	var states []string
	for _, dc := range grant.Candidates {
		states = append(states, dc.Name+"="+dc.State)
	}
	if got := strings.Join(states, ","); grant.Chosen != "live" || got != "live=acked,silent=pending" && got != "live=acked,silent=unresponsive" {
		t.Errorf("first grant to %q, candidate states = %s; decisions %+v", grant.Chosen, got, recs)
	}
	// The reason names the candidate chosen and why the better-ranked one
	// was not, before the strategy's own reason (which names the best).
	want := "live chosen: ranked 2 of 2, the first to answer (silent did not answer its ping); strategy: silent has the oldest versions"
	if r := grant; r.Chosen != "live" || !strings.HasPrefix(r.Reason, want) {
		t.Errorf("first grant: %s %s, reason %q; want a grant to live, reason starting %q", r.Action, r.Chosen, r.Reason, want)
	}
}

func TestPreemptionAndHandover(t *testing.T) {
	t.Parallel()
	// When b steps down, both are pinged for the vacant lease: a is
	// awaited even when b answers first (else b may be granted again,
	// confirm, and be asked to step down a second time).
	env := newPatientEnv(t, fastOptions())
	b := env.join("b", "kcm", "1.31.0", "1.31.0")
	b.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "b leads", b.leading.Load)
	first := env.lease("kcm")

	a := env.join("a", "kcm", "1.30.0", "1.31.0")
	a.elect.Store(true)
	env.eventually(5*time.Second, "a leads after b stepped down", a.leading.Load)
	l := env.lease("kcm")
	if derefStr(l.Spec.HolderIdentity) != "a" || l.Spec.PreferredHolder != nil {
		t.Fatalf("lease after hand-over: %+v", l.Spec)
	}
	if got := derefI32(l.Spec.LeaseTransitions); got != 1 {
		t.Errorf("leaseTransitions = %d, want 1", got)
	}
	if !l.Spec.AcquireTime.After(first.Spec.AcquireTime.Time) {
		t.Errorf("acquireTime not advanced: %v -> %v", first.Spec.AcquireTime, l.Spec.AcquireTime)
	}
	recs := env.settledDecisions("kcm")
	// A write may conflict with b's renewals and be retried: each try is
	// recorded, and exactly one of each succeeded.
	if countDone(recs, "prefer") != 1 || countDone(recs, "grant") != 2 {
		t.Fatalf("decisions = %+v", recs)
	}
	if st := env.c.Stats(); st.Preemptions != 1 {
		t.Errorf("preemptions = %d", st.Preemptions)
	}
	if b.leading.Load() {
		t.Error("b still leading")
	}
}

func TestExpiredLeaseRegrantedToSameHolder(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	opts.HistoryLimit = 2
	// Each expiry starts a round in which both are pinged: a is awaited
	// even when b answers first, so every grant is a re-grant to a.
	env := newPatientEnv(t, opts)
	env.join("a", "kcm", "1.30.0", "1.30.0") // acks, never renews the lease
	env.join("b", "kcm", "1.31.0", "1.31.0")
	env.run()
	env.eventually(3*time.Second, "granted", func() bool { return env.holder("kcm") == "a" })
	first := env.lease("kcm")
	env.eventually(4*time.Second, "re-granted twice", func() bool { return env.c.Stats().Grants >= 3 })
	l := env.lease("kcm")
	if derefStr(l.Spec.HolderIdentity) != "a" || !l.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
		t.Fatalf("lease not re-granted to a: %+v", l.Spec)
	}
	if !l.Spec.AcquireTime.Equal(first.Spec.AcquireTime) || derefI32(l.Spec.LeaseTransitions) != 0 {
		t.Errorf("re-grant to the same holder changed acquireTime/transitions: %+v", l.Spec)
	}
	recs := env.settledDecisions("kcm")
	if len(recs) > 2 {
		t.Errorf("history has %d records, limit 2", len(recs))
	}
	last := recs[len(recs)-1]
	if last.Action != "grant" || last.Holder != "a" || last.Chosen != "a" || last.Trigger != string(abi.ReasonLeaseExpired) {
		t.Errorf("last decision = %+v", last)
	}
}

func TestStalePreferredHolderCleared(t *testing.T) {
	t.Parallel()
	env := newEnv(t, fastOptions())
	b := env.join("b", "kcm", "1.31.0", "1.31.0")
	// b stops renewing while asked to step down: its lease must outlast
	// the rest of the test, or it expires on a loaded machine and the
	// re-grant, not the stale-preferredHolder rule, clears the field.
	b.leaseDur.Store(60)
	b.elect.Store(true)
	b.noRelease.Store(true)
	env.run()
	env.eventually(3*time.Second, "b leads", b.leading.Load)
	a := env.join("a", "kcm", "1.30.0", "1.30.0")
	env.eventually(3*time.Second, "preferredHolder a", func() bool { return env.preferred("kcm") == "a" })
	a.stop()
	if _, _, err := env.e.Delete(context.Background(), env.cands, "a", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.eventually(2*time.Second, "preferredHolder cleared", func() bool { return env.preferred("kcm") == "" })
	renews := b.renewedOnce.Load()
	env.eventually(2*time.Second, "b renews again", func() bool { return b.renewedOnce.Load() > renews })
	if h := env.holder("kcm"); h != "b" {
		t.Fatalf("holder = %q, want b to keep leading", h)
	}
	if st := env.c.Stats(); st.PreferredCleared == 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestNilHolderIsGranted(t *testing.T) {
	t.Parallel()
	env := newEnv(t, fastOptions())
	st := coordinationv1.CoordinatedLeaseStrategy(abi.BuiltinStrategy)
	pre := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kcm"}, Spec: coordinationv1.LeaseSpec{Strategy: &st}}
	if _, err := env.e.Create(context.Background(), env.leases, pre, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.join("a", "kcm", "1.30.0", "1.30.0")
	env.run()
	env.eventually(3*time.Second, "granted", func() bool { return env.holder("kcm") == "a" })
	l := env.lease("kcm")
	if derefI32(l.Spec.LeaseTransitions) != 1 || l.Spec.AcquireTime == nil {
		t.Errorf("spec = %+v", l.Spec)
	}
	if recs := env.settledDecisions("kcm"); recs[len(recs)-1].Trigger != string(abi.ReasonNoHolder) {
		t.Errorf("trigger = %q", recs[len(recs)-1].Trigger)
	}
}

func TestStrategyConflict(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	opts.Registry = NewStaticRegistry(NativeOldest, renamed("example.com/x", NativeOldest))
	env := newEnv(t, opts)
	a := env.joinWith("a", "kcm", "1.30.0", "1.31.0", abi.BuiltinStrategy)
	env.joinWith("b", "kcm", "1.30.0", "1.31.0", "example.com/x")
	env.run()
	env.eventually(2*time.Second, "conflict seen", func() bool { return env.c.Stats().Conflicts > 0 })
	a.renewCandidate(context.Background()) // more events: still one incident
	env.candidateSynced("a")
	if l := env.lease("kcm"); l != nil {
		t.Fatalf("lease created despite the conflict: %+v", l.Spec)
	}
	recs := env.settledDecisions("kcm")
	if countAction(recs, "conflict") != 1 || env.c.Stats().Conflicts != 1 {
		t.Fatalf("conflict recorded %d times, stats %+v", countAction(recs, "conflict"), env.c.Stats())
	}
	if !strings.Contains(recs[0].Reason, "OldestEmulationVersion (a); example.com/x (b)") {
		t.Errorf("reason = %q", recs[0].Reason)
	}
	// A newer binary decides the strategy: the conflict is over.
	env.joinWith("c", "kcm", "1.31.0", "1.32.0", abi.BuiltinStrategy)
	env.eventually(3*time.Second, "granted after the conflict", func() bool { return env.holder("kcm") == "a" })
}

func TestUnknownStrategyAbstainsUntilLoaded(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	reg := NewStaticRegistry(NativeOldest)
	opts.Registry = reg
	env := newEnv(t, opts)
	env.joinWith("a", "sched", "1.30.0", "1.30.0", "example.com/newest")
	env.joinWith("b", "sched", "1.31.0", "1.31.0", "example.com/newest")
	env.run()
	env.eventually(2*time.Second, "abstention recorded", func() bool { return countAction(env.decisions("sched"), "abstain") > 0 })
	if l := env.lease("sched"); l != nil {
		t.Fatalf("lease created for an unknown strategy: %+v", l.Spec)
	}
	if recs := env.settledDecisions("sched"); countAction(recs, "abstain") != 1 {
		t.Fatalf("decisions = %+v", recs)
	}
	// Hot reload: the module appears; a resync elects with it.
	reg.Set("example.com/newest", newest{})
	env.c.Resync()
	env.eventually(3*time.Second, "granted by the new module", func() bool { return env.holder("sched") == "b" })
	l := env.lease("sched")
	if l.Annotations[AnnotationStrategy] != "example.com/newest" || string(*l.Spec.Strategy) != "example.com/newest" {
		t.Errorf("lease = %+v %v", l.Spec, l.Annotations)
	}
}

func TestFailingStrategyFallsBackWithoutPreempting(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"error", "unknown-name", "panic", "bad-action", "timeout"} {
		t.Run(mode, func(t *testing.T) {
			opts := fastOptions()
			// Not much shorter: the fallback's call has the same deadline,
			// and a descheduled call past it would fail too.
			opts.DecideTimeout = 250 * time.Millisecond
			opts.Registry = NewStaticRegistry(NativeOldest, broken{mode: mode})
			env := newEnv(t, opts)
			b := env.joinWith("b", "kcm", "1.31.0", "1.31.0", "example.com/broken")
			b.elect.Store(true)
			env.run()
			env.eventually(3*time.Second, "b leads by fallback", b.leading.Load)
			l := env.lease("kcm")
			if l.Annotations[AnnotationFallbackFrom] != "example.com/broken" || l.Annotations[AnnotationStrategy] != abi.BuiltinStrategy ||
				string(*l.Spec.Strategy) != "example.com/broken" {
				t.Fatalf("lease = %+v %v", l.Spec, l.Annotations)
			}
			// A better candidate: the fallback must not preempt b. The module
			// is backing off, so the decision on a counts in backedOff.
			backedOff := env.c.stats.backedOff.Load()
			env.joinWith("a", "kcm", "1.30.0", "1.30.0", "example.com/broken")
			env.eventually(2*time.Second, "decision on a", func() bool { return env.c.stats.backedOff.Load() > backedOff })
			if p, h := env.preferred("kcm"), env.holder("kcm"); p != "" || h != "b" || !b.leading.Load() {
				t.Fatalf("preferredHolder %q, holder %q after fallback", p, h)
			}
			st := env.c.Stats()
			if st.Fallbacks == 0 || st.StrategyErrors == 0 || st.Preemptions != 0 {
				t.Errorf("stats = %+v", st)
			}
			if n := countAction(env.decisions("kcm"), "strategy-error"); n != 1 {
				t.Errorf("strategy-error recorded %d times, want once per incident", n)
			}
		})
	}
}

// TestGarbageCollection: with the default 30 min validity on an injected
// clock, a candidate that stopped renewing is deleted and one that renews
// is kept; orphan histories go, and so does the history of a lease
// deleted with its candidates.
func TestGarbageCollection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &offsetClock{}
	opts := fastOptions()
	opts.Now = clock.Now
	env := newEnv(t, opts)
	stale := env.join("stale", "kcm", "1.30.0", "1.30.0")
	fresh := env.join("fresh", "kcm", "1.31.0", "1.31.0")
	env.run()
	env.eventually(3*time.Second, "granted", func() bool { return env.holder("kcm") != "" })
	stale.stop()
	env.candidateSynced("stale")
	if err := env.h.RecordDecision(ctx, testNS, "ghost", DecisionRecordForTest("x"), 0); err != nil {
		t.Fatal(err)
	}
	// 20 min on, fresh renews (stale cannot); 15 min later only stale is
	// past the validity.
	clock.jump(20 * time.Minute)
	renewed := clock.Now()
	fresh.renewCandidate(ctx)
	env.eventually(2*time.Second, "fresh's renewal seen", func() bool {
		e := env.cachedCandidate("kcm", "fresh")
		return e != nil && !e.renewAt.Before(renewed)
	})
	clock.jump(15 * time.Minute)
	if n := env.collectUntilGone("stale"); n != 1 {
		t.Fatalf("collected %d candidates, want 1", n)
	}
	if _, err := env.e.Get(ctx, env.cands, "stale", &metav1.GetOptions{}); err == nil {
		t.Error("stale candidate survived")
	}
	if _, err := env.e.Get(ctx, env.cands, "fresh", &metav1.GetOptions{}); err != nil {
		t.Errorf("fresh candidate: %v", err)
	}
	if recs := env.decisions("ghost"); len(recs) != 0 {
		t.Errorf("orphan history kept: %+v", recs)
	}
	if recs := env.decisions("kcm"); len(recs) == 0 {
		t.Error("live lease history collected")
	}
	// Deleting the lease and its candidates deletes its history. The
	// candidate goes first and the controller sees it go: otherwise it
	// may see the lease deleted while its candidate still waits, and
	// rightly create the lease again for it.
	fresh.stop()
	if _, _, err := env.e.Delete(ctx, env.cands, "fresh", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.candidateSynced("fresh")
	if _, _, err := env.e.Delete(ctx, env.leases, "kcm", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var left []history.DecisionRecord
	deadline := time.Now().Add(waitSlack * 2 * time.Second)
	for left = env.decisions("kcm"); len(left) > 0; left = env.decisions("kcm") {
		if time.Now().After(deadline) {
			var recs []string
			for _, r := range left {
				recs = append(recs, fmt.Sprintf("#%d %s %s %s->%s %q (%s)", r.Seq, r.Time.Format(time.StampMicro), r.Action, r.Holder, r.Chosen, r.Reason, r.Outcome))
			}
			t.Fatalf("history not deleted with the lease after %v; left: %s", waitSlack*2*time.Second, strings.Join(recs, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInjectedClockCandidateValidity runs with the default 30 min
// candidate validity on an injected clock: after a jump of 31 min the
// candidates no longer count and the GC deletes them.
func TestInjectedClockCandidateValidity(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	opts := fastOptions()
	opts.Now = clock.Now
	env := newEnv(t, opts)
	a := env.join("a", "kcm", "1.30.0", "1.30.0")
	b := env.join("b", "kcm", "1.31.0", "1.31.0")
	env.run()
	env.eventually(3*time.Second, "granted", func() bool { return env.holder("kcm") == "a" })
	if n := env.c.CollectGarbage(context.Background()); n != 0 {
		t.Fatalf("collected %d fresh candidates", n)
	}
	// No ack may land after the jump: it would renew a candidate on the
	// controller's clock.
	a.stop()
	b.stop()
	env.candidateSynced("a")
	env.candidateSynced("b")
	clock.jump(31 * time.Minute)
	jumped := clock.Now()
	env.c.Resync()
	// A grant writes renewTime from the controller's clock: none may be
	// from after the jump. (A grant decided before it may still land.)
	time.Sleep(200 * time.Millisecond)
	if l := env.lease("kcm"); !l.Spec.RenewTime.Time.Before(jumped) {
		t.Errorf("granted to expired candidates after the jump: %+v", l.Spec)
	}
	if n := env.collectUntilGone("a", "b"); n != 2 {
		t.Fatalf("collected %d candidates after 31 min, want 2", n)
	}
}

func TestDecisionHistoryBounded(t *testing.T) {
	t.Parallel()
	env := newEnv(t, fastOptions())
	ctx := context.Background()
	for i := 1; i <= 8; i++ {
		r := DecisionRecordForTest("grant")
		r.Seq = int64(i)
		if err := env.h.RecordDecision(ctx, testNS, "l", r, 5); err != nil {
			t.Fatal(err)
		}
	}
	recs := env.decisions("l")
	if len(recs) != 5 || recs[0].Seq != 4 || recs[4].Seq != 8 {
		t.Fatalf("history = %+v", recs)
	}
	if err := env.h.RecordDecision(ctx, testNS, "bad/name", DecisionRecordForTest("x"), 0); err == nil {
		t.Error("invalid lease name accepted")
	}
	keys, err := env.h.DecisionLeases(ctx)
	if err != nil || len(keys) != 1 || keys[0].Name != "l" || keys[0].Namespace != testNS {
		t.Fatalf("DecisionLeases = %v, %v", keys, err)
	}
	if err := env.h.DeleteDecisions(ctx, testNS, "l"); err != nil {
		t.Fatal(err)
	}
	if err := env.h.DeleteDecisions(ctx, testNS, "l"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if recs := env.decisions("l"); len(recs) != 0 {
		t.Fatalf("after delete: %+v", recs)
	}
}

func TestResolveStrategyOrderIndependent(t *testing.T) {
	t.Parallel()
	mk := func(name, bin, strategy string) *candEntry {
		e := &candEntry{}
		e.obj = candidateObj(name, bin, strategy)
		return e
	}
	a := mk("a", "1.30.0", abi.BuiltinStrategy)
	b := mk("b", "1.30.0", "foo.com/bar")
	c := mk("c", "1.31.0", abi.BuiltinStrategy)
	d := mk("d", "garbage", "foo.com/baz")
	perms := [][]*candEntry{{a, b, c, d}, {c, a, b, d}, {b, d, c, a}, {d, c, b, a}}
	for _, p := range perms {
		if name, conflict := resolveStrategy(p); name != abi.BuiltinStrategy || conflict != "" {
			t.Errorf("order %s: got %q %q", names(p), name, conflict)
		}
	}
	var first string
	for _, p := range [][]*candEntry{{a, b, d}, {b, a, d}, {d, b, a}} {
		_, conflict := resolveStrategy(p)
		if conflict == "" || (first != "" && conflict != first) {
			t.Errorf("order %s: conflict %q, first %q", names(p), conflict, first)
		}
		first = conflict
	}
}

// Test strategies.

// renamed serves s under another name.
type renamedStrategy struct {
	name string
	abi.Strategy
}

func renamed(name string, s abi.Strategy) abi.Strategy { return renamedStrategy{name, s} }
func (r renamedStrategy) Name() string                 { return r.name }
func (r renamedStrategy) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: r.name, Version: "test"}
}

// newest ranks the highest binary version first.
type newest struct{}

func (newest) Name() string { return "example.com/newest" }
func (newest) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: "example.com/newest", Version: "1.0.0", SHA256: "abc"}
}
func (newest) Decide(_ context.Context, in *abi.Input) (*abi.Decision, error) {
	d := Oldest(in)
	for i, j := 0, len(d.Ranking)-1; i < j; i, j = i+1, j-1 {
		d.Ranking[i], d.Ranking[j] = d.Ranking[j], d.Ranking[i]
	}
	d.Action, d.Preempt, d.Reason = abi.ActionPrefer, true, "newest binary first"
	if len(d.Ranking) > 0 && in.Lease.Exists && !in.Lease.Expired && in.Lease.Holder == d.Ranking[0] {
		d.Action, d.Preempt = abi.ActionKeep, false
	}
	return d, nil
}

// broken fails in the given way.
type broken struct{ mode string }

func (broken) Name() string { return "example.com/broken" }
func (broken) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: "example.com/broken", Version: "0.0.1"}
}
func (b broken) Decide(ctx context.Context, in *abi.Input) (*abi.Decision, error) {
	switch b.mode {
	case "error":
		return nil, errors.New("module trapped")
	case "unknown-name":
		return &abi.Decision{Ranking: []string{"intruder"}, Action: abi.ActionPrefer, Preempt: true}, nil
	case "panic":
		panic("guest bug")
	case "bad-action":
		return &abi.Decision{Ranking: nil, Action: "seize"}, nil
	}
	<-ctx.Done()
	return &abi.Decision{Action: abi.ActionKeep}, nil
}

// TestHandOverWriteOutlastsRenewals: the preferredHolder write is made on
// the cached lease, which a holder renewing faster than a reconcile (on a
// busy device) has always renewed since: it is applied again to the lease
// as renewed, keeping the renewal. A change of term meanwhile (another
// holder) still fails it, for a fresh decision.
func TestHandOverWriteOutlastsRenewals(t *testing.T) {
	t.Parallel()
	env := newEnv(t, fastOptions())
	ctx := context.Background()
	k := leaseKey{testNS, "kcm"}
	st := coordinationv1.CoordinatedLeaseStrategy(abi.BuiltinStrategy)
	holder, dur := "b", int32(30)
	rt := metav1.NewMicroTime(time.Now())
	env.createLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kcm"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &rt, AcquireTime: &rt, Strategy: &st}})
	cached := env.lease("kcm") // as the cache holds it: read back
	view := func(l *coordinationv1.Lease) leaseView {
		return viewLease(&leaseEntry{obj: l, renewSeen: time.Now()}, time.Now())
	}

	env.updateLease("kcm", func(l *coordinationv1.Lease) {
		now := metav1.NewMicroTime(time.Now().Add(time.Second))
		l.Spec.RenewTime = &now
	})
	renewed := env.lease("kcm")
	if err := env.c.setPreferred(ctx, k, view(cached), "a", abi.BuiltinStrategy); err != nil {
		t.Fatalf("preferredHolder on a lease renewed since it was cached: %v", err)
	}
	l := env.lease("kcm")
	if derefStr(l.Spec.PreferredHolder) != "a" || !microEqual(l.Spec.RenewTime, renewed.Spec.RenewTime) {
		t.Fatalf("lease = %+v, want preferredHolder a and the renewal kept", l.Spec)
	}

	other := "c"
	env.updateLease("kcm", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity, l.Spec.PreferredHolder = &other, nil })
	err := env.c.setPreferred(ctx, k, view(l), "a", abi.BuiltinStrategy)
	if !apierrors.IsConflict(err) {
		t.Fatalf("preferredHolder on a lease another holder took since: %v, want a conflict", err)
	}
	if l := env.lease("kcm"); l.Spec.PreferredHolder != nil || derefStr(l.Spec.HolderIdentity) != "c" {
		t.Errorf("lease = %+v, want c's term untouched", l.Spec)
	}
}

// TestPingResultAfterDeletionNotCached: a ping's write commits, the
// candidate is deleted, the deletion's event reaches the cache, and only
// then the ping's result comes back (on a slow machine, as in CI under
// qemu). The result must not bring the deleted candidate back into the
// cache, where it would be counted and pinged until the next relist; it
// still refreshes a candidate that exists.
func TestPingResultAfterDeletionNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newEnv(t, fastOptions())
	a := env.join("a", "kcm", "1.30.0", "1.30.0")
	a.ack.Store(false) // its renewals would race the writes below
	env.run()
	env.candidateSynced("a")
	k := leaseKey{testNS, "kcm"}
	// ping writes pingTime as the controller does (which pings too, so a
	// conflict is retried).
	ping := func() *coordinationv1beta1.LeaseCandidate {
		t.Helper()
		for {
			o, err := env.e.Get(ctx, env.cands, "a", &metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lc := o.(*coordinationv1beta1.LeaseCandidate).DeepCopy()
			pt := metav1.NewMicroTime(time.Now())
			lc.Spec.PingTime = &pt
			out, _, err := env.e.Update(ctx, env.cands, "a", lc, &metav1.UpdateOptions{})
			if err == nil {
				return out.(*coordinationv1beta1.LeaseCandidate)
			}
			if !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
	}

	// A result that arrives in time refreshes the cached candidate.
	fresh := ping()
	env.c.observeCandidate(fresh, fromWrite)
	if e := env.cachedCandidate("kcm", "a"); e == nil || rvOf(e.obj) < rvOf(fresh) {
		t.Fatalf("write result of a cached candidate not taken: %+v", e)
	}

	late := ping()
	a.stop()
	if _, _, err := env.e.Delete(ctx, env.cands, "a", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.candidateSynced("a")
	env.c.observeCandidate(late, fromWrite)
	if e := env.cachedCandidate("kcm", "a"); e != nil {
		t.Fatalf("a deleted candidate came back into the cache from a late write result (rv %d)", rvOf(e.obj))
	}
	// The controller's own ping of the candidate it still thought alive
	// finds it gone and leaves the cache as it is.
	env.c.pingOne(ctx, k, late.DeepCopy())
	if e := env.cachedCandidate("kcm", "a"); e != nil {
		t.Fatalf("a ping of a deleted candidate cached it again (rv %d)", rvOf(e.obj))
	}
	env.c.mu.Lock()
	_, byLease := env.c.cands[k]
	env.c.mu.Unlock()
	if byLease {
		t.Error("an empty candidate set was left for the lease")
	}
}

// TestUpdateResultAfterDeletionNotCached is the same race for a lease the
// controller updated: its result, back after the deletion's event, must
// not bring the lease back into the cache (where it would also keep the
// lease's decision history from being deleted with it).
func TestUpdateResultAfterDeletionNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newEnv(t, fastOptions())
	st := coordinationv1.CoordinatedLeaseStrategy(abi.BuiltinStrategy)
	env.createLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{Strategy: &st}})
	env.run()
	env.eventually(2*time.Second, "the coordinated lease cached", func() bool { return env.cachedLease("l") != nil })
	relabel := func(v string) *coordinationv1.Lease {
		return env.updateLease("l", func(l *coordinationv1.Lease) { metav1.SetMetaDataLabel(&l.ObjectMeta, "v", v) })
	}
	fresh := relabel("1")
	env.c.observeUpdatedLease(fresh)
	if e := env.cachedLease("l"); e == nil || rvOf(e.obj) < rvOf(fresh) {
		t.Fatalf("update result of a cached lease not taken: %+v", e)
	}
	late := relabel("2")
	if _, _, err := env.e.Delete(ctx, env.leases, "l", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.eventually(2*time.Second, "the deletion seen", func() bool { return env.cachedLease("l") == nil })
	env.c.observeUpdatedLease(late)
	if e := env.cachedLease("l"); e != nil {
		t.Fatalf("a deleted lease came back into the cache from a late update result (rv %d)", rvOf(e.obj))
	}
}
