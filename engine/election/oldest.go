package election

import (
	"context"
	"fmt"
	"sort"

	"github.com/leasehold/leasehold/plugins/abi"
)

// Oldest is OldestEmulationVersion as a pure function, following upstream
// (kubernetes pkg/controlplane/controller/leaderelection/election.go):
//
//   - a candidate is eligible only if both its emulation and binary
//     versions parse (abi.ParseVersion, tolerant like upstream); as
//     upstream, its declared strategy does not matter: the lease's strategy
//     was already resolved over all candidates, and skipping an old binary
//     that declared another strategy would elect a newer one over it, which
//     is the version skew this strategy exists to prevent;
//   - lowest emulation version first, then lowest binary version, then
//     oldest creation time; upstream then falls back to list order, which
//     is not deterministic, so ties end on the candidate name.
//
// The ranking lists every eligible candidate (the host grants to the first
// acked one). The action is keep when the live holder already ranks first,
// keep with an empty ranking when nobody is eligible, and otherwise prefer
// with preemption, as upstream sets preferredHolder on a live holder.
//
// It is the oracle the embedded WASM module is tested against and the
// last-resort fallback when no module can run.
func Oldest(in *abi.Input) *abi.Decision {
	elig := make([]*abi.Candidate, 0, len(in.Candidates))
	for i := range in.Candidates {
		c := &in.Candidates[i]
		if c.EmulationVersion.Valid && c.BinaryVersion.Valid {
			elig = append(elig, c)
		}
	}
	sort.Slice(elig, func(i, j int) bool { return oldestLess(elig[i], elig[j]) })
	d := &abi.Decision{Ranking: make([]string, len(elig))}
	for i, c := range elig {
		d.Ranking[i] = c.Name
	}
	switch {
	case len(elig) == 0:
		d.Action, d.Reason = abi.ActionKeep, "no candidate with valid versions"
	case in.Lease.Exists && !in.Lease.Expired && in.Lease.Holder == elig[0].Name:
		d.Action, d.Reason = abi.ActionKeep, "holder has the oldest versions"
	default:
		best := elig[0]
		d.Action, d.Preempt = abi.ActionPrefer, true
		d.Reason = fmt.Sprintf("%s has the oldest versions (emulation %s, binary %s)",
			best.Name, best.EmulationVersion.Raw, best.BinaryVersion.Raw)
	}
	return d
}

// oldestLess is the strict total order of Oldest.
func oldestLess(a, b *abi.Candidate) bool {
	if c := abi.CompareVersion(a.EmulationVersion, b.EmulationVersion); c != 0 {
		return c < 0
	}
	if c := abi.CompareVersion(a.BinaryVersion, b.BinaryVersion); c != 0 {
		return c < 0
	}
	if a.CreationTimeUs != b.CreationTimeUs {
		return a.CreationTimeUs < b.CreationTimeUs
	}
	return a.Name < b.Name
}

// NativeOldest is Oldest as a Strategy, for a controller that must decide
// even when no WebAssembly module can run.
var NativeOldest abi.Strategy = nativeOldest{}

type nativeOldest struct{}

func (nativeOldest) Name() string { return abi.BuiltinStrategy }

func (nativeOldest) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: abi.BuiltinStrategy, Version: "native", Builtin: true}
}

func (nativeOldest) Decide(ctx context.Context, in *abi.Input) (*abi.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Oldest(in), nil
}
