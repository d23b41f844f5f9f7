package election

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// BenchmarkDecide is one strategy call on a vacant lease of three acked
// candidates, through the backoff and validation, without (plain) and
// with the progress check: the check's cost per decision.
func BenchmarkDecide(b *testing.B) {
	c := newEnv(b, fastOptions()).c
	strat := &counting{name: "example.com/counting", sha: "c0ffee"}
	now := time.Now()
	k := leaseKey{testNS, "l"}
	var valid []*candEntry
	byName := map[string]*candEntry{}
	for _, name := range []string{"a", "b", "c"} {
		e := &candEntry{obj: candidateObj(name, "1.30.0", strat.name), renewAt: now, pingAt: now.Add(-time.Millisecond), ackAt: now}
		e.obj.Spec.EmulationVersion = "1.30.0"
		valid = append(valid, e)
		byName[name] = e
	}
	lv := leaseView{exists: true, obj: &coordinationv1.Lease{}}
	m := &memo{incidents: map[string]string{}}
	in := c.buildInput(k, m, strat.name, lv, valid, nil, now)
	ctx := context.Background()
	for _, bc := range []struct {
		name     string
		progress progressCheck
	}{
		{"plain", nil},
		{"progress", func(d *abi.Decision) error { return c.stalls(d, lv, valid, byName, now) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := c.decide(ctx, k, strat, in, bc.progress); d.fallback {
					b.Fatalf("fell back: %v", d.failure)
				}
			}
		})
	}
}
