package election

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine/history"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slowGrants are fastOptions with grants long enough that an expiry can
// never be what moved a lease during a test.
func slowGrants() Options {
	o := fastOptions()
	o.GrantDuration = 30 * time.Second
	o.FirstGrantWait = -1
	return o
}

func grantsOf(recs []history.DecisionRecord) []string {
	var out []string
	for _, r := range recs {
		if r.Action == "grant" && r.Outcome == "ok" {
			out = append(out, r.Holder+"->"+r.Chosen)
		}
	}
	return out
}

// TestUnconfirmedGrantMoves: a grant its holder has not renewed yet goes
// to a better candidate that appears at once (not at expiry, 30 s here);
// the move is recorded as a grant from the unconfirmed holder.
func TestUnconfirmedGrantMoves(t *testing.T) {
	t.Parallel()
	env := newEnv(t, slowGrants())
	env.join("worse", "kcm", "1.31.0", "1.31.0") // never confirms
	env.run()
	env.eventually(2*time.Second, "worse granted", func() bool { return env.holder("kcm") == "worse" })
	granted := env.lease("kcm")
	if g := granted.Annotations[AnnotationGrantedRenewTime]; g != granted.Spec.RenewTime.UTC().Format(metav1.RFC3339Micro) {
		t.Fatalf("%s = %q, renewTime %v", AnnotationGrantedRenewTime, g, granted.Spec.RenewTime)
	}

	better := env.join("better", "kcm", "1.30.0", "1.31.0")
	better.elect.Store(true)
	env.eventually(2*time.Second, "better leads", better.leading.Load)
	l := env.lease("kcm")
	if derefStr(l.Spec.HolderIdentity) != "better" || l.Spec.PreferredHolder != nil || derefI32(l.Spec.LeaseTransitions) != 1 {
		t.Fatalf("lease after the move: %+v", l.Spec)
	}
	if l.Annotations[AnnotationGrantedRenewTime] == l.Spec.RenewTime.UTC().Format(metav1.RFC3339Micro) {
		t.Errorf("the holder renewed, yet the lease still reads as unconfirmed: %v", l.Annotations)
	}
	recs := env.settledDecisions("kcm")
	if got := strings.Join(grantsOf(recs), " "); got != "->worse worse->better" {
		t.Errorf("grants = %s; decisions %+v", got, recs)
	}
	if countAction(recs, "prefer") != 0 {
		t.Errorf("a preferredHolder was set for an unconfirmed grant: %+v", recs)
	}
	if last := recs[len(recs)-1]; !strings.Contains(last.Reason, "worse had not confirmed") {
		t.Errorf("move recorded as %+v", last)
	}
}

// TestConfirmedGrantIsHandedOver: once the holder renewed, a better
// candidate gets the lease only through preferredHolder, never by a move.
func TestConfirmedGrantIsHandedOver(t *testing.T) {
	t.Parallel()
	// better is awaited in the round after worse stepped down, even when
	// worse answers first (see TestPreemptionAndHandover).
	env := newPatientEnv(t, fastOptions())
	worse := env.join("worse", "kcm", "1.31.0", "1.31.0")
	worse.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "worse leads", worse.leading.Load)
	better := env.join("better", "kcm", "1.30.0", "1.31.0")
	better.elect.Store(true)
	env.eventually(5*time.Second, "better leads", better.leading.Load)
	recs := env.settledDecisions("kcm")
	if countDone(recs, "prefer") != 1 || env.c.stats.moves.Load() != 0 {
		t.Errorf("moves = %d; decisions %+v", env.c.stats.moves.Load(), recs)
	}
}

// confirm is a coordinated holder's renewal of lease name as read in l:
// an update at l's resourceVersion, as client-go's tryCoordinatedRenew
// (a Get, then an Update of what it got).
func (env *testEnv) confirm(l *coordinationv1.Lease) error {
	l = l.DeepCopy()
	rt := metav1.NewMicroTime(time.Now())
	d := int32(30)
	l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &rt, &d
	_, _, err := env.e.Update(context.Background(), env.leases, l.Name, l, &metav1.UpdateOptions{})
	return err
}

// TestMoveRacesConfirmation puts the holder's confirming renewal and the
// move in both orders at the moment they race (just before the move's
// write): exactly one succeeds. If the move wins, the holder's renewal
// fails with a conflict, so a holder that only leads after its renewal
// (client-go, leasehold run --candidate) never leads. If the renewal
// wins, the move fails with a conflict and the controller, seeing a
// confirmed holder, asks it to step down instead.
func TestMoveRacesConfirmation(t *testing.T) {
	t.Parallel()
	t.Run("MoveFirst", func(t *testing.T) {
		env := newEnv(t, slowGrants())
		env.join("worse", "kcm", "1.31.0", "1.31.0")
		env.run()
		env.eventually(2*time.Second, "worse granted", func() bool { return env.holder("kcm") == "worse" })
		read := env.lease("kcm") // the holder's Get, before the move
		env.join("better", "kcm", "1.30.0", "1.31.0")
		env.eventually(2*time.Second, "moved to better", func() bool { return env.holder("kcm") == "better" })
		err := env.confirm(read)
		if !apierrors.IsConflict(err) {
			t.Fatalf("the unconfirmed holder's renewal after the move: %v, want a conflict", err)
		}
		if l := env.lease("kcm"); derefStr(l.Spec.HolderIdentity) != "better" {
			t.Fatalf("lease = %+v", l.Spec)
		}
	})
	t.Run("ConfirmFirst", func(t *testing.T) {
		env := newEnv(t, slowGrants())
		env.join("worse", "kcm", "1.31.0", "1.31.0")
		env.run()
		env.eventually(2*time.Second, "worse granted", func() bool { return env.holder("kcm") == "worse" })
		read := env.lease("kcm")
		confirmed := make(chan error, 1)
		env.c.beforeMove = func() {
			env.c.beforeMove = nil // the worker is the only reader: no race
			confirmed <- env.confirm(read)
		}
		env.join("better", "kcm", "1.30.0", "1.31.0")
		var err error
		select {
		case err = <-confirmed:
		case <-time.After(10 * time.Second):
			t.Fatal("the controller never tried to move the grant")
		}
		if err != nil {
			t.Fatalf("the holder's renewal before the move: %v", err)
		}
		env.eventually(2*time.Second, "worse asked to step down for better", func() bool { return env.preferred("kcm") == "better" })
		l := env.lease("kcm")
		if derefStr(l.Spec.HolderIdentity) != "worse" {
			t.Fatalf("the confirmed holder lost the lease to a move: %+v", l.Spec)
		}
		recs := env.settledDecisions("kcm")
		var failed bool
		for _, r := range recs {
			if r.Action == "grant" && r.Chosen == "better" && strings.Contains(r.Outcome, "the object has been modified") {
				failed = true
			}
		}
		if !failed || countDone(recs, "prefer") != 1 {
			t.Errorf("want a move that failed on a conflict, then a preferredHolder; decisions %+v", recs)
		}
	})
}

// TestFirstGrantWaitsForPingRound: the grant of a missing lease, or of
// one vacant before its candidates appeared, waits FirstGrantWait from
// when the first candidate was seen, so a better candidate that registers
// meanwhile gets it; the worse one is never granted.
func TestFirstGrantWaitsForPingRound(t *testing.T) {
	t.Parallel()
	for _, vacancy := range []string{"missing", "expired"} {
		t.Run(vacancy, func(t *testing.T) {
			opts := slowGrants()
			opts.FirstGrantWait = 2 * time.Second
			// better, pinged as soon as it is seen, is awaited until it
			// answers even if it registers late in the window.
			env := newPatientEnv(t, opts)
			if vacancy == "expired" {
				// Held by a holder that is gone, under a coordinated
				// strategy, before any candidate exists.
				gone, one := "gone", int32(1)
				rt := metav1.NewMicroTime(time.Now())
				st := coordinationv1.OldestEmulationVersion
				env.createLease(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kcm"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &gone, LeaseDurationSeconds: &one, RenewTime: &rt, Strategy: &st}})
			}
			env.run()
			if vacancy == "expired" {
				env.eventually(2*time.Second, "lease expired", func() bool {
					le := env.cachedLease("kcm")
					return le != nil && !viewLease(le, time.Now()).live
				})
			}
			seen := time.Now()
			env.join("worse", "kcm", "1.31.0", "1.31.0")
			env.candidateSynced("worse")
			env.join("better", "kcm", "1.30.0", "1.31.0")
			env.eventually(3*time.Second, "lease granted", func() bool { h := env.holder("kcm"); return h != "" && h != "gone" })
			if waited := time.Since(seen); waited < opts.FirstGrantWait {
				t.Errorf("granted %v after the first candidate appeared, before the %v window ended", waited, opts.FirstGrantWait)
			}
			recs := env.settledDecisions("kcm")
			want := "->better"
			if vacancy == "expired" {
				want = "gone->better"
			}
			if got := strings.Join(grantsOf(recs), " "); got != want {
				t.Errorf("grants = %s, want only %s; decisions %+v", got, want, recs)
			}
		})
	}
}

// TestWaitsForStrategiesLoaded: until the registry says its modules are
// loaded the controller leaves a lease whose strategy is missing alone
// (no abstention for a strategy that is merely loading) and is not ready,
// while a lease whose strategy is built in is decided at once; then the
// module decides.
func TestWaitsForStrategiesLoaded(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	reg := NewStaticRegistry(NativeOldest)
	loaded := make(chan struct{})
	opts.Registry, opts.StrategiesLoaded, opts.StrategiesLoadWait = reg, loaded, time.Hour
	env := newEnv(t, opts)
	env.joinWith("a", "sched", "1.30.0", "1.30.0", "example.com/newest")
	env.joinWith("b", "sched", "1.31.0", "1.31.0", "example.com/newest")
	env.join("builtin", "kcm", "1.30.0", "1.30.0")
	env.run()
	env.candidateSynced("a")
	env.candidateSynced("b")
	env.eventually(5*time.Second, "the built-in strategy's lease granted during the load",
		func() bool { return env.holder("kcm") == "builtin" })
	if h := env.holder("sched"); h != "" {
		t.Fatalf("sched granted to %q before its module loaded", h)
	}
	if err := env.c.Deciding(); err == nil || !strings.Contains(err.Error(), "strategy modules") {
		t.Fatalf("Deciding before the modules loaded = %v", err)
	}
	reg.Set("example.com/newest", newest{})
	close(loaded)
	env.eventually(3*time.Second, "granted by the module", func() bool { return env.holder("sched") == "b" })
	if err := env.c.Deciding(); err != nil {
		t.Errorf("Deciding after the load = %v", err)
	}
	recs := env.settledDecisions("sched")
	if countAction(recs, "abstain") != 0 || countAction(recs, "strategy-error") != 0 {
		t.Errorf("decisions = %+v", recs)
	}
	if l := env.lease("sched"); l.Annotations[AnnotationStrategy] != "example.com/newest" {
		t.Errorf("annotations = %v", l.Annotations)
	}
}

// TestStrategiesLoadTimeout: when the modules take longer than
// StrategiesLoadWait, the fallback grants (audited as a fallback whose
// cause is the load), and once they load the module decides.
func TestStrategiesLoadTimeout(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	reg := NewStaticRegistry(NativeOldest)
	loaded := make(chan struct{})
	opts.Registry, opts.StrategiesLoaded, opts.StrategiesLoadWait = reg, loaded, 200*time.Millisecond
	// a is awaited even when b answers first: a fallback decision never
	// preempts, so b, once granted and confirmed, would keep the lease.
	env := newPatientEnv(t, opts)
	a := env.joinWith("a", "sched", "1.30.0", "1.30.0", "example.com/newest")
	b := env.joinWith("b", "sched", "1.31.0", "1.31.0", "example.com/newest")
	a.elect.Store(true)
	b.elect.Store(true)
	env.run()
	// The fallback (oldest emulation version) grants to a.
	env.eventually(3*time.Second, "a leads by the fallback", a.leading.Load)
	l := env.lease("sched")
	if l.Annotations[AnnotationFallbackFrom] != "example.com/newest" || l.Annotations[AnnotationStrategy] != NativeOldest.Name() {
		t.Fatalf("annotations = %v", l.Annotations)
	}
	recs := env.settledDecisions("sched")
	var audited bool
	for _, r := range recs {
		if r.Action == "strategy-error" && strings.Contains(r.Reason, "not finished loading") {
			audited = true
		}
	}
	if !audited || countAction(recs, "abstain") != 0 {
		t.Errorf("decisions = %+v", recs)
	}
	if err := env.c.Deciding(); err != nil {
		t.Errorf("Deciding after the wait timed out = %v", err)
	}
	// The module arrives: it prefers the newest binary, b.
	reg.Set("example.com/newest", newest{})
	close(loaded)
	env.eventually(5*time.Second, "b leads by the module", b.leading.Load)
	if l := env.lease("sched"); l.Annotations[AnnotationStrategy] != "example.com/newest" {
		t.Errorf("annotations = %v", l.Annotations)
	}
}

// TestUnservedCandidateSaysWhy: a candidate applied without renewTime, and
// one that never answers a ping, are each reported once with the reason.
func TestUnservedCandidateSaysWhy(t *testing.T) {
	t.Parallel()
	env := newEnv(t, fastOptions())
	bare := candidateObj("bare", "1.30.0", NativeOldest.Name())
	bare.Spec.LeaseName, bare.Spec.EmulationVersion = "kcm", "1.30.0"
	if _, err := env.e.Create(context.Background(), env.cands, bare, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	silent := env.join("silent", "kcm", "1.29.0", "1.30.0")
	silent.ack.Store(false)
	live := env.join("live", "kcm", "1.31.0", "1.31.0")
	live.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "live leads", live.leading.Load)
	reasonOf := func(name string) (n int, reason string) {
		for _, r := range env.decisions("kcm") {
			if r.Action != "unserved" {
				continue
			}
			for part := range strings.SplitSeq(r.Reason, "; ") {
				if after, ok := strings.CutPrefix(part, name+": "); ok {
					n, reason = n+1, after
				}
			}
		}
		return n, reason
	}
	env.eventually(3*time.Second, "silent reported", func() bool { n, _ := reasonOf("silent"); return n > 0 })
	if n, r := reasonOf("bare"); n != 1 || !strings.Contains(r, "spec.renewTime is not set") {
		t.Errorf("bare reported %d times, last %q", n, r)
	}
	if n, r := reasonOf("silent"); n != 1 || !strings.Contains(r, "did not answer a ping") {
		t.Errorf("silent reported %d times, last %q", n, r)
	}
	// Further decisions (a resync re-decides) report nothing new.
	before := countAction(env.decisions("kcm"), "unserved")
	env.c.Resync()
	env.candidateSynced("live")
	if n := countAction(env.settledDecisions("kcm"), "unserved"); n != before {
		t.Errorf("unserved records %d -> %d after a resync", before, n)
	}
}

// TestLapsedHolderNotAwaitedLong: when the best-ranked holder lets its
// lease expire, the next best that answered is granted about as soon as
// it answered, not after GrantAckWait (a minute here, which the test
// would not survive).
func TestLapsedHolderNotAwaitedLong(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	opts.PingWindow, opts.GrantAckWait, opts.UnresponsiveRetry = 2*time.Minute, time.Minute, 3*time.Minute
	env := newEnv(t, opts)
	best := env.join("best", "kcm", "1.29.0", "1.31.0")
	best.elect.Store(true)
	next := env.join("next", "kcm", "1.30.0", "1.31.0")
	next.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "best leads", best.leading.Load)
	// Counted from here: on a loaded machine next may answer the first
	// round well before best, be granted first and lose the grant to
	// best, which is two transitions already.
	before := derefI32(env.lease("kcm").Spec.LeaseTransitions)
	best.stop() // dies: no renewal, no ack, no release
	env.eventually(3*time.Second, "next leads after best's lease expired", next.leading.Load)
	if l := env.lease("kcm"); derefI32(l.Spec.LeaseTransitions) != before+1 {
		t.Errorf("leaseTransitions %d -> %d, want one hand-over from best to next; lease = %+v",
			before, derefI32(l.Spec.LeaseTransitions), l.Spec)
	}
}

// TestLapsedHolderAliveGetsItBack: a best-ranked holder that let its lease
// expire but is alive (it answers pings, as leasehold run --candidate does
// after a server outage) is awaited like any better candidate and granted
// the lease again, never the next best. How long it is awaited once the
// next best answered (about twice that ack time) is a matter of the
// machine's load, so the env awaits it patiently.
func TestLapsedHolderAliveGetsItBack(t *testing.T) {
	t.Parallel()
	env := newPatientEnv(t, fastOptions())
	best := env.join("best", "kcm", "1.29.0", "1.31.0")
	best.elect.Store(true)
	next := env.join("next", "kcm", "1.30.0", "1.31.0")
	next.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "best leads", best.leading.Load)
	best.elect.Store(false) // stops renewing, still answers pings
	env.eventually(3*time.Second, "the lease expired and was granted again", func() bool {
		l := env.lease("kcm")
		return l.Spec.AcquireTime != nil && l.Annotations[AnnotationGrantedRenewTime] != "" &&
			derefStr(l.Spec.HolderIdentity) == "best" && env.c.stats.grants.Load() >= 2
	})
	best.elect.Store(true)
	env.eventually(3*time.Second, "best leads again", best.leading.Load)
	if next.renewedOnce.Load() != 0 {
		t.Error("next led")
	}
	if got := strings.Join(grantsOf(env.settledDecisions("kcm")), " "); strings.Contains(got, "next") {
		t.Errorf("grants = %s", got)
	}
}
