// Command newest-binary-version is an example election strategy written in
// Go with plugins/sdk: the candidate with the newest binary version leads
// (the opposite of OldestEmulationVersion: "always run the newest
// controller", e.g. for a canary that should take over as soon as it is
// up). Ties go to the oldest candidate, then the name.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o newest-binary-version.wasm .
package main

import (
	"fmt"
	"sort"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/sdk"
)

// Name is the strategy name candidates declare.
const Name = "example.com/newest-binary-version"

func init() {
	sdk.Register(abi.Info{Name: Name, Version: "1.0.0",
		Description: "The candidate with the newest binary version leads."}, decide)
}

func main() {}

func decide(in *abi.Input) (*abi.Decision, error) {
	var elig []abi.Candidate
	for _, c := range in.Candidates {
		if c.BinaryVersion.Valid {
			elig = append(elig, c)
		}
	}
	sort.Slice(elig, func(i, j int) bool {
		a, b := elig[i], elig[j]
		if c := abi.CompareVersion(a.BinaryVersion, b.BinaryVersion); c != 0 {
			return c > 0
		}
		if a.CreationTimeUs != b.CreationTimeUs {
			return a.CreationTimeUs < b.CreationTimeUs
		}
		return a.Name < b.Name
	})
	d := &abi.Decision{Ranking: make([]string, len(elig))}
	for i, c := range elig {
		d.Ranking[i] = c.Name
	}
	switch {
	case len(elig) == 0:
		d.Action, d.Reason = abi.ActionKeep, "no candidate with a valid binary version"
	case in.Lease.Exists && !in.Lease.Expired && in.Lease.Holder == elig[0].Name:
		d.Action, d.Reason = abi.ActionKeep, "holder has the newest binary"
	default:
		d.Action, d.Preempt = abi.ActionPrefer, true
		d.Reason = fmt.Sprintf("%s has the newest binary %s", elig[0].Name, elig[0].BinaryVersion.Raw)
	}
	sdk.Log(abi.LogDebug, "ranked %d of %d candidates", len(elig), len(in.Candidates))
	return d, nil
}
