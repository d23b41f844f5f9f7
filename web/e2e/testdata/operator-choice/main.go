// Command operator-choice is a test strategy that honours an operator's
// hand-over: a preferredHolder naming a candidate ranks first (with
// preemption); otherwise a live holder that is a candidate stays; a free
// lease goes to the lowest name. A coordinated holder clears
// preferredHolder as it steps down, so a hand-over sticks only to the
// candidate with the lowest name: the end-to-end hand-over test uses it
// for a hand-over the strategy keeps and one it refuses.
package main

import (
	"slices"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/sdk"
)

func init() {
	sdk.Register(abi.Info{Name: "example.com/operator-choice", Version: "1.0.0",
		Description: "The operator's preferredHolder leads; else the holder stays; else the lowest name."}, decide)
}

func main() {}

func decide(in *abi.Input) (*abi.Decision, error) {
	d := &abi.Decision{Ranking: []string{}}
	for _, c := range in.Candidates { // sorted by name
		d.Ranking = append(d.Ranking, c.Name)
	}
	l := in.Lease
	if i := slices.Index(d.Ranking, l.PreferredHolder); i > 0 {
		d.Ranking = append(append([]string{l.PreferredHolder}, d.Ranking[:i]...), d.Ranking[i+1:]...)
	}
	switch {
	case len(d.Ranking) == 0:
		d.Action, d.Reason = abi.ActionKeep, "no candidate"
	case l.PreferredHolder != "" && slices.Contains(d.Ranking, l.PreferredHolder):
		d.Action, d.Preempt, d.Reason = abi.ActionPrefer, true, "the operator prefers "+l.PreferredHolder
	case l.Exists && !l.Expired && l.HolderIsCandidate:
		d.Action, d.Reason = abi.ActionKeep, "the holder stays"
	default:
		d.Action, d.Reason = abi.ActionPrefer, "lowest name first"
	}
	return d, nil
}
