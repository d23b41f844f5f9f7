package election

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/plugins/abi"
)

const hour = 3600_000000

func cand(name, emu, bin string, createdUs int64) abi.Candidate {
	return abi.NewCandidate(name, bin, emu, abi.BuiltinStrategy, createdUs)
}

func input(lease abi.LeaseState, cs ...abi.Candidate) *abi.Input {
	return &abi.Input{ABIVersion: abi.ABIVersion, Strategy: abi.BuiltinStrategy, Lease: lease, Candidates: cs}
}

// TestOldestUpstreamCases replays upstream's election_test.go
// (TestPickBestLeaderOldestEmulationVersion, TestCompare,
// TestValidLeaseCandidateForOldestEmulationVersion, TestShouldReelect) as
// rankings: the first entry is upstream's pick.
func TestOldestUpstreamCases(t *testing.T) {
	t.Parallel()
	now := int64(100 * hour)
	tests := []struct {
		name  string
		cands []abi.Candidate
		want  []string
	}{
		{"empty", nil, []string{}},
		{"single candidate", []abi.Candidate{cand("candidate1", "0.1.0", "0.1.0", now)}, []string{"candidate1"}},
		{"different emulation versions", []abi.Candidate{
			cand("candidate1", "0.1.0", "0.1.0", now-hour), cand("candidate2", "0.2.0", "0.2.0", now)},
			[]string{"candidate1", "candidate2"}},
		{"same emulation, different binary versions", []abi.Candidate{
			cand("candidate2", "0.1.0", "0.2.0", now-hour), cand("candidate1", "0.1.0", "0.1.0", now)},
			[]string{"candidate1", "candidate2"}},
		{"same versions, different creation timestamps", []abi.Candidate{
			cand("candidate2", "0.1.0", "0.1.0", now), cand("candidate1", "0.1.0", "0.1.0", now-hour)},
			[]string{"candidate1", "candidate2"}},
		{"identical versions, earlier timestamp wins", []abi.Candidate{
			cand("lhs", "1.20.0", "1.21.0", now+1), cand("rhs", "1.20.0", "1.21.0", now)},
			[]string{"rhs", "lhs"}},
		{"invalid emulation version is not a candidate", []abi.Candidate{
			cand("invalid", "invalid", "0.1.0", 0), cand("valid", "0.2.0", "0.2.0", now)},
			[]string{"valid"}},
		{"invalid binary version is not a candidate", []abi.Candidate{
			cand("invalid", "0.1.0", "invalid", 0), cand("valid", "0.2.0", "0.2.0", now)},
			[]string{"valid"}},
		{"missing versions are not candidates", []abi.Candidate{
			cand("none", "", "", 0), cand("valid", "1.20.0", "1.21.0", now)},
			[]string{"valid"}},
		{"lower emulation wins", []abi.Candidate{
			cand("a", "1.20.0", "1.20.0", 0), cand("b", "1.19.0", "1.20.0", now)},
			[]string{"b", "a"}},
		{"numeric not lexicographic: 1.2.0 < 1.19.0", []abi.Candidate{
			cand("a", "1.19.0", "1.20.0", 0), cand("b", "1.2.0", "1.20.0", now)},
			[]string{"b", "a"}},
		{"newer binary does not reelect", []abi.Candidate{
			cand("component-identity-1", "1.19.0", "1.19.0", now), cand("component-identity-2", "1.19.0", "1.20.0", now)},
			[]string{"component-identity-1", "component-identity-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Oldest(input(abi.LeaseState{}, tt.cands...))
			if !reflect.DeepEqual(got.Ranking, tt.want) {
				t.Fatalf("ranking = %q, want %q", got.Ranking, tt.want)
			}
			if err := got.Validate(input(abi.LeaseState{}, tt.cands...)); err != nil && len(tt.want) > 0 {
				t.Fatalf("decision invalid: %v", err)
			}
		})
	}
}

// TestOldestVersionRules covers upstream's ParseTolerant and semver Compare
// semantics that the upstream tests leave implicit.
func TestOldestVersionRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cands []abi.Candidate
		want  []string
	}{
		{"tolerant forms parse", []abi.Candidate{
			cand("short", "1.31", "v1.31", 0), cand("spaces", " 1.30.0 ", "1.31.0", 0)},
			[]string{"spaces", "short"}},
		{"pre-release before its release", []abi.Candidate{
			cand("ga", "1.31.0", "1.31.0", 0), cand("rc", "1.31.0-rc.1", "1.31.0", 0)},
			[]string{"rc", "ga"}},
		{"pre-release identifiers: numeric < alpha, numeric compared as numbers, shorter first", []abi.Candidate{
			cand("alpha-beta", "1.0.0-alpha.beta", "2.0.0", 0), cand("alpha", "1.0.0-alpha", "2.0.0", 0),
			cand("alpha-1", "1.0.0-alpha.1", "2.0.0", 0), cand("beta-11", "1.0.0-beta.11", "2.0.0", 0),
			cand("beta-2", "1.0.0-beta.2", "2.0.0", 0), cand("rc-1", "1.0.0-rc.1", "2.0.0", 0)},
			[]string{"alpha", "alpha-1", "alpha-beta", "beta-2", "beta-11", "rc-1"}},
		{"build metadata ignored, tie broken by name", []abi.Candidate{
			cand("b", "1.30.0+abc", "1.31.0", 5), cand("a", "1.30.0", "1.31.0+def", 5)},
			[]string{"a", "b"}},
		{"declared strategy does not matter (upstream)", []abi.Candidate{
			abi.NewCandidate("old-other", "1.30.0", "1.30.0", "example.com/x", 0), cand("new", "1.31.0", "1.31.0", 0)},
			[]string{"old-other", "new"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Oldest(input(abi.LeaseState{}, tt.cands...))
			if !reflect.DeepEqual(got.Ranking, tt.want) {
				t.Fatalf("ranking = %q, want %q", got.Ranking, tt.want)
			}
		})
	}
}

// TestOldestOrderIndependent: upstream falls back to list order on full
// ties; ours must give the same ranking for every permutation.
func TestOldestOrderIndependent(t *testing.T) {
	t.Parallel()
	cs := []abi.Candidate{cand("c", "1.30.0", "1.31.0", 7), cand("a", "1.30.0", "1.31.0", 7),
		cand("b", "1.30.0", "1.31.0", 7), cand("d", "1.29.0", "1.31.0", 9)}
	want := []string{"d", "a", "b", "c"}
	perm := func(p []int) []abi.Candidate {
		out := make([]abi.Candidate, len(p))
		for i, j := range p {
			out[i] = cs[j]
		}
		return out
	}
	for _, p := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}} {
		if got := Oldest(input(abi.LeaseState{}, perm(p)...)).Ranking; !reflect.DeepEqual(got, want) {
			t.Fatalf("order %v: ranking = %q, want %q", p, got, want)
		}
	}
}

func TestOldestAction(t *testing.T) {
	t.Parallel()
	cs := []abi.Candidate{cand("old", "1.30.0", "1.30.0", 0), cand("new", "1.31.0", "1.31.0", 0)}
	live := func(holder string) abi.LeaseState {
		return abi.LeaseState{Exists: true, Holder: holder, LeaseDurationS: 15}
	}
	expired := live("old")
	expired.Expired = true
	tests := []struct {
		name    string
		lease   abi.LeaseState
		cands   []abi.Candidate
		action  abi.Action
		preempt bool
	}{
		{"best already holds", live("old"), cs, abi.ActionKeep, false},
		{"better candidate preempts", live("new"), cs, abi.ActionPrefer, true},
		{"missing lease is granted", abi.LeaseState{}, cs, abi.ActionPrefer, true},
		{"expired lease of the best is re-granted", expired, cs, abi.ActionPrefer, true},
		{"nobody eligible keeps", live("new"), []abi.Candidate{cand("x", "bad", "1.0.0", 0)}, abi.ActionKeep, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.lease, tt.cands...)
			d := Oldest(in)
			if d.Action != tt.action || d.Preempt != tt.preempt {
				t.Fatalf("got action %q preempt %v, want %q %v (%s)", d.Action, d.Preempt, tt.action, tt.preempt, d.Reason)
			}
			if err := d.Validate(in); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNativeOldestStrategy(t *testing.T) {
	t.Parallel()
	in := abi.SampleInput(abi.BuiltinStrategy)
	d, err := NativeOldest.Decide(context.Background(), in)
	if err != nil || !reflect.DeepEqual(d, Oldest(in)) {
		t.Fatalf("Decide = %v, %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NativeOldest.Decide(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Decide: err = %v, want context.Canceled", err)
	}
	if m := NativeOldest.Module(); !m.Builtin || m.Name != abi.BuiltinStrategy {
		t.Fatalf("Module() = %+v", m)
	}
}
