package election

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine/history"
)

func (env *testEnv) drain(identity string, forced bool) {
	env.t.Helper()
	if _, _, err := env.h.Drain(context.Background(), history.DrainRecord{Namespace: testNS, Identity: identity,
		By: "alice", Time: time.Now(), Via: "test", Forced: forced}); err != nil {
		env.t.Fatalf("drain %s: %v", identity, err)
	}
	env.eventually(2*time.Second, "the controller saw the drain of "+identity, func() bool {
		_, ok := env.c.Drained(testNS, identity)
		return ok
	})
}

func (env *testEnv) undrain(identity string) {
	env.t.Helper()
	if _, _, err := env.h.Undrain(context.Background(), testNS, identity); err != nil {
		env.t.Fatalf("undrain %s: %v", identity, err)
	}
}

// lastInputDrained reports how the last recorded strategy input of lease
// showed candidate name: found, and drained.
func (env *testEnv) lastInputDrained(lease, name string) (found, drained bool) {
	recs := env.decisions(lease)
	for i := len(recs) - 1; i >= 0; i-- {
		if in := recs[i].Input; in != nil {
			for _, c := range in.Candidates {
				if c.Name == name {
					return true, c.Drained
				}
			}
		}
	}
	return false, false
}

// TestDrainedCandidateNeverGranted: the strategy ranks the drained
// candidate first (the built-in knows nothing of drains), and the lease
// goes to the next one; the strategy's input says who is drained.
func TestDrainedCandidateNeverGranted(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	opts.GrantDuration = time.Minute // no expiry, so no second grant to look at
	env := newPatientEnv(t, opts)
	env.run()
	env.drain("oldest", false)
	env.join("oldest", "kcm", "1.30.0", "1.30.0")
	env.join("next", "kcm", "1.30.0", "1.31.0")
	env.join("newest", "kcm", "1.31.0", "1.31.0")
	env.eventually(3*time.Second, "lease granted", func() bool { return env.holder("kcm") != "" })
	if h := env.holder("kcm"); h != "next" {
		t.Fatalf("holder %q, want next (oldest is drained)", h)
	}
	recs := env.settledDecisions("kcm")
	var grant *history.DecisionRecord
	for i := range recs {
		if recs[i].Action == "grant" {
			grant = &recs[i]
		}
	}
	if grant == nil || grant.Chosen != "next" || !strings.Contains(grant.Reason, "drained, never granted: oldest") {
		t.Fatalf("grant record %+v, want next chosen with the drain named in its reason", grant)
	}
	if grant.Decision == nil || grant.Decision.Ranking[0] != "oldest" {
		t.Errorf("the record's decision %+v is not the strategy's answer as given (oldest first)", grant.Decision)
	}
	if found, drained := env.lastInputDrained("kcm", "oldest"); !found || !drained {
		t.Errorf("the strategy's input shows oldest found=%v drained=%v, want drained", found, drained)
	}
	if found, drained := env.lastInputDrained("kcm", "next"); !found || drained {
		t.Errorf("the strategy's input shows next found=%v drained=%v, want not drained", found, drained)
	}
}

// TestDrainedHolderHandsOver: the holder, which the strategy keeps, is
// drained and hands over to the next best within one lease duration; it
// is not chosen again until undrained, and undrain gives it back the
// lease the strategy prefers it for.
func TestDrainedHolderHandsOver(t *testing.T) {
	t.Parallel()
	env := newPatientEnv(t, fastOptions())
	best := env.join("best", "kcm", "1.30.0", "1.30.0")
	best.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "best leads", best.leading.Load)
	other := env.join("other", "kcm", "1.31.0", "1.31.0")
	other.elect.Store(true)
	env.candidateSynced("other")

	start := time.Now()
	env.drain("best", false)
	leaseDur := time.Duration(best.leaseDur.Load()) * time.Second
	env.eventually(leaseDur, "other leads after best was drained", other.leading.Load)
	took := time.Since(start)
	t.Logf("drained holder handed over in %v (lease duration %v)", took.Round(time.Millisecond), leaseDur)
	recs := env.settledDecisions("kcm")
	var prefer *history.DecisionRecord
	for i := range recs {
		if recs[i].Action == "prefer" && recs[i].Outcome == "ok" {
			prefer = &recs[i]
		}
	}
	if prefer == nil || prefer.Chosen != "other" || !strings.Contains(prefer.Reason, "holder best is drained (by alice)") {
		t.Fatalf("prefer record %+v, want other chosen because best is drained", prefer)
	}
	// Drained, best is never chosen again, though the strategy ranks it
	// first and it answers every ping; a second of renewals and pings
	// (resyncs included) shows it.
	env.c.Resync()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if h := env.holder("kcm"); h != "other" || env.preferred("kcm") != "" {
			t.Fatalf("holder %q preferred %q while best is drained, want other and none", h, env.preferred("kcm"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	env.undrain("best")
	env.eventually(3*time.Second, "best leads again after undrain", best.leading.Load)
}

// TestDrainSurvivesCandidateRecreation: the drain is the identity's, not
// the LeaseCandidate's: deleted and created again (as a restarted process
// does), the candidate is still drained.
func TestDrainSurvivesCandidateRecreation(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	opts.GrantDuration = time.Minute
	env := newPatientEnv(t, opts)
	env.run()
	env.drain("best", false)
	best := env.join("best", "kcm", "1.30.0", "1.30.0")
	env.join("other", "kcm", "1.31.0", "1.31.0")
	env.eventually(3*time.Second, "lease granted", func() bool { return env.holder("kcm") != "" })
	if h := env.holder("kcm"); h != "other" {
		t.Fatalf("holder %q, want other", h)
	}
	best.stop()
	old, err := env.e.Get(context.Background(), env.cands, "best", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.e.Delete(context.Background(), env.cands, "best", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.candidateSynced("best")
	again := env.join("best", "kcm", "1.30.0", "1.30.0")
	again.elect.Store(true)
	env.candidateSynced("best")
	now, err := env.e.Get(context.Background(), env.cands, "best", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if old.(*coordinationv1beta1.LeaseCandidate).UID == now.(*coordinationv1beta1.LeaseCandidate).UID {
		t.Fatal("the candidate was not re-created")
	}
	// Free the lease: the re-created best would win it if it were not
	// drained.
	l := env.lease("kcm")
	empty := ""
	l.Spec.HolderIdentity = &empty
	if _, _, err := env.e.Update(context.Background(), env.leases, "kcm", l, &metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.eventually(3*time.Second, "the lease granted again", func() bool { return env.holder("kcm") != "" })
	if h := env.holder("kcm"); h != "other" {
		t.Fatalf("holder %q after re-creation, want other (best is still drained)", h)
	}
	env.settledDecisions("kcm")
	if found, drained := env.lastInputDrained("kcm", "best"); !found || !drained {
		t.Errorf("the strategy's input shows the re-created best found=%v drained=%v, want drained", found, drained)
	}
}

// TestForcedDrainOfOnlyHolderAsksStepDown: a holder drained by force,
// with no other candidate, is asked to step down (the annotation
// `leasehold run` honours); one drained without force would keep the
// lease, but CheckDrain refuses that drain in the first place.
func TestForcedDrainOfOnlyHolderAsksStepDown(t *testing.T) {
	t.Parallel()
	env := newPatientEnv(t, fastOptions())
	only := env.join("only", "kcm", "1.30.0", "1.30.0")
	only.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "only leads", only.leading.Load)
	env.drain("only", true)
	env.eventually(3*time.Second, "step-down asked", func() bool {
		l := env.lease("kcm")
		return l != nil && l.Annotations[AnnotationStepDown] == "only"
	})
	recs := env.settledDecisions("kcm")
	if countDone(recs, "step-down") != 1 {
		t.Fatalf("decisions %+v, want one step-down", recs)
	}
}

// TestCheckDrain: draining the only live candidate of a lease is refused;
// another live, undrained candidate of every lease the identity stands
// for allows it.
func TestCheckDrain(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *metav1.MicroTime { t := metav1.NewMicroTime(now.Add(d)); return &t }
	cand := func(name, lease string, renew, ping *metav1.MicroTime) coordinationv1beta1.LeaseCandidate {
		return coordinationv1beta1.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: lease, RenewTime: renew, PingTime: ping}}
	}
	const validity, window = 30 * time.Minute, 5 * time.Second
	for _, tc := range []struct {
		name    string
		cands   []coordinationv1beta1.LeaseCandidate
		drained map[string]bool
		refused string // lease named in the refusal, "" for none
	}{
		{"another live candidate", []coordinationv1beta1.LeaseCandidate{cand("a", "l", at(0), nil), cand("b", "l", at(-time.Minute), nil)}, nil, ""},
		{"alone", []coordinationv1beta1.LeaseCandidate{cand("a", "l", at(0), nil)}, nil, "l"},
		{"the other is drained", []coordinationv1beta1.LeaseCandidate{cand("a", "l", at(0), nil), cand("b", "l", at(0), nil)}, map[string]bool{"b": true}, "l"},
		{"the other expired", []coordinationv1beta1.LeaseCandidate{cand("a", "l", at(0), nil), cand("b", "l", at(-time.Hour), nil)}, nil, "l"},
		{"the other ignores pings", []coordinationv1beta1.LeaseCandidate{cand("a", "l", at(0), nil), cand("b", "l", at(-time.Minute), at(-10*time.Second))}, nil, "l"},
		{"the other's ping is fresh", []coordinationv1beta1.LeaseCandidate{cand("a", "l", at(0), nil), cand("b", "l", at(-time.Minute), at(-time.Second))}, nil, ""},
		{"alone on one of two leases", []coordinationv1beta1.LeaseCandidate{cand("a", "l", at(0), nil), cand("a", "m", at(0), nil), cand("b", "l", at(0), nil)}, nil, "m"},
		{"not a candidate", []coordinationv1beta1.LeaseCandidate{cand("b", "l", at(0), nil)}, nil, ""},
	} {
		err := CheckDrain(tc.cands, tc.drained, "a", now, validity, window)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && (!errors.Is(err, ErrDrainRefused) || !strings.Contains(err.Error(), "lease "+tc.refused)):
			t.Errorf("%s: err %v, want a refusal naming lease %s", tc.name, err, tc.refused)
		}
	}
}
