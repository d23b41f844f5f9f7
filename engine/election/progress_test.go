package election

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// TestStallsJudgesVacantLeases: on a vacant lease a decision fails the
// progress check when it neither grants to nor waits for a ranked
// candidate while another candidate answered; a live lease, abstaining,
// and a ranking that grants or may still grant all pass.
func TestStallsJudgesVacantLeases(t *testing.T) {
	t.Parallel()
	c := newEnv(t, fastOptions()).c
	now := time.Now()
	w := c.opts.PingWindow
	cand := func(name string, pingAgo, ackAgo time.Duration) *candEntry {
		e := &candEntry{obj: candidateObj(name, "1.30.0", abi.BuiltinStrategy), renewAt: now.Add(-time.Minute)}
		if pingAgo > 0 {
			e.pingAt = now.Add(-pingAgo)
		}
		if ackAgo > 0 {
			e.ackAt = now.Add(-ackAgo)
		}
		return e
	}
	dead := cand("dead", 2*w, 0)                    // pinged, never answered: unresponsive
	slow := cand("slow", c.opts.GrantAckWait/2, 0)  // pinged just now: may still answer
	idle := cand("idle", 0, 0)                      // never pinged
	live := cand("live", w/4, w/4-time.Millisecond) // answered its ping
	valid := []*candEntry{dead, idle, live, slow}
	byName := map[string]*candEntry{}
	for _, e := range valid {
		byName[e.obj.Name] = e
	}
	vacant := leaseView{exists: true, obj: &coordinationv1.Lease{}, holder: "dead"}
	held := leaseView{exists: true, obj: &coordinationv1.Lease{}, holder: "dead", live: true}
	prefer := func(names ...string) *abi.Decision {
		return &abi.Decision{Action: abi.ActionPrefer, Ranking: names}
	}
	for _, tc := range []struct {
		what  string
		lv    leaseView
		d     *abi.Decision
		valid []*candEntry
		stall bool
	}{
		{"only the dead holder", vacant, prefer("dead"), valid, true},
		{"keep on a vacant lease", vacant, &abi.Decision{Action: abi.ActionKeep, Ranking: []string{"dead"}}, valid, true},
		{"keep with the live one ranked", vacant, &abi.Decision{Action: abi.ActionKeep, Ranking: []string{"live"}}, valid, true},
		{"missing lease", leaseView{}, prefer("dead"), valid, true},
		{"dead then live", vacant, prefer("dead", "live"), valid, false},
		{"a ranked one may still answer", vacant, prefer("dead", "slow"), valid, false},
		{"a ranked one to ping", vacant, prefer("dead", "idle"), valid, false},
		{"nobody answered", vacant, prefer("dead"), []*candEntry{dead, idle, slow}, false},
		{"abstain", vacant, &abi.Decision{Action: abi.ActionAbstain}, valid, false},
		{"live lease", held, prefer("dead"), valid, false},
	} {
		err := c.stalls(tc.d, tc.lv, tc.valid, byName, now)
		if (err != nil) != tc.stall || err != nil && !errors.Is(err, errNoProgress) {
			t.Errorf("%s: stalls = %v, want stall %v", tc.what, err, tc.stall)
		}
		if err != nil && !strings.Contains(err.Error(), "while live did") {
			t.Errorf("%s: error %q does not name the candidate that answered", tc.what, err)
		}
	}
	if got := c.unrankedIdle([]string{"dead"}, valid, now); len(got) != 1 || got[0] != "idle" {
		t.Errorf("probe of a ranking of dead = %v, want [idle]", got)
	}
}

// loyal ranks only the lease's holder, dead or alive, once there is one
// (and Oldest's ranking before): well-formed, and left alone it would
// keep a vacant lease waiting on a holder that died.
type loyal struct{ action abi.Action }

func (loyal) Name() string { return "example.com/loyal" }
func (loyal) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: "example.com/loyal", Version: "1.0.0", SHA256: "10a1"}
}
func (l loyal) Decide(_ context.Context, in *abi.Input) (*abi.Decision, error) {
	if in.Lease.Holder == "" {
		return Oldest(in), nil
	}
	return &abi.Decision{Ranking: []string{in.Lease.Holder}, Action: l.action, Reason: "the holder, always"}, nil
}

// TestRankingOnlyDeadHolderFallsBack: the holder dies and the strategy
// keeps ranking only it. The live candidate, which the ranking leaves
// out, is probed, answers, and the decision then counts as a strategy
// failure: the fallback grants the lease to the live candidate, and the
// history records why. UnresponsiveRetry is an hour, so nothing but the
// progress check can end the wait within the test.
func TestRankingOnlyDeadHolderFallsBack(t *testing.T) {
	t.Parallel()
	for _, action := range []abi.Action{abi.ActionPrefer, abi.ActionKeep} {
		t.Run(string(action), func(t *testing.T) {
			opts := fastOptions()
			opts.UnresponsiveRetry = time.Hour
			opts.FailureBackoff = time.Hour
			strat := loyal{action: action}
			opts.Registry = NewStaticRegistry(NativeOldest, strat)
			env := newEnv(t, opts)
			name := strat.Name()
			holder := env.joinWith("holder", "kcm", "1.30.0", "1.30.0", name)
			holder.elect.Store(true)
			env.run()
			env.eventually(3*time.Second, "holder leads", holder.leading.Load)
			next := env.joinWith("next", "kcm", "1.31.0", "1.31.0", name)
			next.elect.Store(true)
			holder.stop()
			env.eventually(10*time.Second, "next leads after the holder died", next.leading.Load)

			l := env.lease("kcm")
			if l.Annotations[AnnotationFallbackFrom] != name || l.Annotations[AnnotationStrategy] != abi.BuiltinStrategy {
				t.Errorf("lease not granted by the fallback: %v", l.Annotations)
			}
			if env.c.stats.stalls.Load() == 0 {
				t.Error("no decision failed the progress check")
			}
			var stalled bool
			for _, r := range env.settledDecisions("kcm") {
				stalled = stalled || r.Action == "strategy-error" && strings.Contains(r.Reason, errNoProgress.Error()) &&
					strings.Contains(r.Reason, "while next did")
			}
			if !stalled {
				t.Errorf("history lacks the progress failure: %+v", env.decisions("kcm"))
			}
		})
	}
}

// exclusive ranks only "chosen", leaving out every other candidate.
type exclusive struct{}

func (exclusive) Name() string { return "example.com/exclusive" }
func (exclusive) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: "example.com/exclusive", Version: "1.0.0", SHA256: "e1"}
}
func (exclusive) Decide(_ context.Context, in *abi.Input) (*abi.Decision, error) {
	for _, c := range in.Candidates {
		if c.Name == "chosen" {
			return &abi.Decision{Ranking: []string{"chosen"}, Action: abi.ActionPrefer, Preempt: true, Reason: "only chosen"}, nil
		}
	}
	return &abi.Decision{Action: abi.ActionAbstain, Reason: "chosen is not here"}, nil
}

// TestExclusiveRankingIsNotAStall: a ranking may leave live candidates
// out; as long as it grants to one that answered it makes progress, and
// the candidates it left out are not pinged for it.
func TestExclusiveRankingIsNotAStall(t *testing.T) {
	t.Parallel()
	opts := fastOptions()
	opts.Registry = NewStaticRegistry(NativeOldest, exclusive{})
	// chosen is awaited until it answers: a ranked candidate that has
	// not answered within GrantAckWait (300 ms would do on an idle
	// machine, not under load) is no progress, and then the candidates
	// the ranking left out are probed, rightly.
	env := newPatientEnv(t, opts)
	name := exclusive{}.Name()
	other := env.joinWith("other", "kcm", "1.29.0", "1.29.0", name)
	chosen := env.joinWith("chosen", "kcm", "1.31.0", "1.31.0", name)
	chosen.elect.Store(true)
	env.run()
	env.eventually(3*time.Second, "chosen leads", chosen.leading.Load)
	if l := env.lease("kcm"); l.Annotations[AnnotationStrategy] != name || l.Annotations[AnnotationFallbackFrom] != "" {
		t.Errorf("lease = %v", l.Annotations)
	}
	if st := env.c.Stats(); st.StrategyErrors != 0 || st.Fallbacks != 0 {
		t.Errorf("stats = %+v", st)
	}
	if n := other.pings(); n != 0 {
		t.Errorf("the candidate the ranking left out was pinged %d times", n)
	}
}
