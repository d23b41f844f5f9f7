package abi

import (
	"fmt"
	"math/rand/v2"
)

// Sample is a named Input: a golden vector for self-tests and the default
// input of `leasehold plugin test`.
type Sample struct {
	Name  string
	Input *Input
}

// sampleEpochUs is a fixed "now" (2026-01-01T00:00:00Z) so samples are
// reproducible byte for byte.
const sampleEpochUs int64 = 1767225600_000000

// NewCandidate builds a candidate with host-parsed versions, as the
// controller does from a LeaseCandidate.
func NewCandidate(name, binary, emulation, strategy string, createdUs int64) Candidate {
	return Candidate{
		Name:             name,
		CreationTimeUs:   createdUs,
		BinaryVersion:    ParseVersion(binary),
		EmulationVersion: ParseVersion(emulation),
		Strategy:         strategy,
		RenewTimeUs:      sampleEpochUs - 1_000_000,
		Acked:            true,
	}
}

// Samples returns the golden vectors every module must answer with a
// well-formed Decision before the host serves it: no candidates, one, a
// mixed-version upgrade, invalid versions, an expired lease, a lease held by
// a non-candidate and 100 generated candidates. They are freshly built on
// each call, so callers may modify them.
func Samples(strategy string) []Sample {
	base := func(reason Reason, lease LeaseState, cands ...Candidate) *Input {
		lease.Namespace, lease.Name, lease.Strategy = "kube-system", "kube-controller-manager", strategy
		return &Input{ABIVersion: ABIVersion, Strategy: strategy, NowUs: sampleEpochUs, DecisionSeq: 1,
			Seed: 42, Reason: reason, Lease: lease, Candidates: cands}
	}
	t0 := sampleEpochUs - 3600_000000
	held := LeaseState{Exists: true, Holder: "kcm-b", AcquireTimeUs: t0, RenewTimeUs: sampleEpochUs - 2_000000,
		LeaseDurationS: 15, HolderIsCandidate: true, HolderSinceUs: t0}
	expired := held
	expired.Expired, expired.RenewTimeUs = true, sampleEpochUs-60_000000
	foreign := held
	foreign.Holder, foreign.HolderIsCandidate = "someone-else", false
	return []Sample{
		{"no-candidates", base(ReasonLeaseMissing, LeaseState{})},
		{"one-candidate", base(ReasonLeaseMissing, LeaseState{},
			NewCandidate("kcm-a", "1.31.0", "1.31.0", strategy, t0))},
		{"upgrade-in-progress", base(ReasonCandidateChanged, held,
			NewCandidate("kcm-a", "1.31.0", "1.30.0", strategy, t0),
			NewCandidate("kcm-b", "1.31.0", "1.31.0", strategy, t0+1_000000),
			NewCandidate("kcm-c", "1.32.0-rc.1", "1.31.0", strategy, t0+2_000000))},
		{"invalid-versions", base(ReasonNoHolder, LeaseState{Exists: true, LeaseDurationS: 15},
			NewCandidate("bad-a", "banana", "1.30.0", strategy, t0),
			NewCandidate("bad-b", "1.31.0", "", strategy, t0),
			NewCandidate("ok-c", "v1.31", "1.31", strategy, t0))},
		{"expired-lease", base(ReasonLeaseExpired, expired,
			NewCandidate("kcm-a", "1.31.0", "1.31.0", strategy, t0),
			NewCandidate("kcm-b", "1.31.0", "1.31.0", strategy, t0))},
		{"foreign-holder", base(ReasonPeriodic, foreign,
			NewCandidate("kcm-a", "1.30.0", "1.30.0", strategy, t0),
			NewCandidate("kcm-b", "1.31.0", "1.30.0", "example.com/other", t0))},
		{"hundred-candidates", GenerateInput(7, 100, strategy)},
	}
}

// SampleInput is the default input for running a module offline.
func SampleInput(strategy string) *Input {
	return Samples(strategy)[2].Input
}

// GenerateInput builds a pseudo-random but reproducible Input with n
// candidates: realistic names, versions from a small pool (so ties on
// every key happen), some invalid or pre-release versions, creation times
// at one-second resolution and a mix of acked and declared strategies.
// Candidates are sorted by name, as the host sends them.
func GenerateInput(seed uint64, n int, strategy string) *Input {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	versions := []string{"1.29.3", "1.30.0", "1.30.1", "1.31.0", "1.31.0-rc.1", "1.31.0-rc.2",
		"1.31.0-alpha.1", "1.31.0-alpha.beta", "v1.31", "1.31", "1.32.0", "1.10.0", "1.2.0", "banana", ""}
	pick := func() string { return versions[r.IntN(len(versions))] }
	others := []string{strategy, strategy, strategy, "example.com/newest-binary-version"}
	t0 := sampleEpochUs - 86400_000000
	cands := make([]Candidate, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("kube-controller-manager-node-%04d_%08x", i, r.Uint32())
		c := NewCandidate(name, pick(), pick(), others[r.IntN(len(others))], t0+int64(r.IntN(5))*1_000000)
		c.UID = fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), r.Uint64()&0xffffffffffff)
		c.Acked = r.IntN(4) != 0
		if c.Acked {
			c.PingTimeUs = sampleEpochUs - 3_000000
		}
		cands = append(cands, c)
	}
	sortCandidates(cands)
	lease := LeaseState{Namespace: "kube-system", Name: "kube-scheduler", Strategy: strategy, LeaseDurationS: 15}
	if n > 0 && r.IntN(3) != 0 {
		lease.Exists, lease.Holder, lease.HolderIsCandidate = true, cands[r.IntN(n)].Name, true
		lease.RenewTimeUs = sampleEpochUs - 5_000000
		lease.Expired = r.IntN(4) == 0
	}
	return &Input{ABIVersion: ABIVersion, Strategy: strategy, NowUs: sampleEpochUs, DecisionSeq: int64(seed),
		Seed: seed, Reason: ReasonCandidateChanged, Lease: lease, Candidates: cands}
}

func sortCandidates(c []Candidate) {
	// Insertion sort keeps this package free of sort/slices for tiny guests;
	// names are generated in order already, so it is linear in practice.
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].Name < c[j-1].Name; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}
