package history

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// TestDecisionInputsKeepSettingsOnce: records keep each decision's whole
// input and answer; a settings document is stored once per history
// however many records used it, comes back in every record's input, and
// is dropped with the last record that used it.
func TestDecisionInputsKeepSettingsOnce(t *testing.T) {
	env := newTestStore(t)
	ctx := context.Background()
	settingsA := json.RawMessage(`{"zone":"` + strings.Repeat("a", 2000) + `"}`)
	settingsB := json.RawMessage(`{"zone":"b"}`)
	rec := func(seq int64, settings json.RawMessage) DecisionRecord {
		in := abi.SampleInput("example.com/zoned")
		in.DecisionSeq, in.Settings = seq, settings
		return DecisionRecord{Time: time.Unix(seq, 0).UTC(), Seq: seq, Action: "grant", Input: in,
			Decision: &abi.Decision{Ranking: []string{"kcm-a"}, Action: abi.ActionPrefer}}
	}
	const keep = 3
	for seq := int64(1); seq <= 3; seq++ {
		if err := env.RecordDecision(ctx, "ns", "l", rec(seq, settingsA), keep); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := env.kv.Get(ctx, decisionKey("ns", "l"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(kv.Value), strings.Repeat("a", 2000)); n != 1 {
		t.Fatalf("stored history holds the settings %d times, want once", n)
	}
	recs, err := env.Decisions(ctx, "ns", "l")
	if err != nil || len(recs) != 3 {
		t.Fatalf("Decisions = %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.Input == nil || string(r.Input.Settings) != string(settingsA) || r.SettingsRef != "" ||
			r.Decision == nil || r.Decision.Action != abi.ActionPrefer || len(r.Input.Candidates) == 0 {
			t.Fatalf("record %d: input %+v decision %+v ref %q", r.Seq, r.Input, r.Decision, r.SettingsRef)
		}
	}
	// Three records with other settings push every record of A out.
	for seq := int64(4); seq <= 6; seq++ {
		if err := env.RecordDecision(ctx, "ns", "l", rec(seq, settingsB), keep); err != nil {
			t.Fatal(err)
		}
	}
	kv, err = env.kv.Get(ctx, decisionKey("ns", "l"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kv.Value), strings.Repeat("a", 2000)) {
		t.Fatal("settings no record uses any more are still stored")
	}
	recs, err = env.Decisions(ctx, "ns", "l")
	if err != nil || len(recs) != 3 || string(recs[0].Input.Settings) != string(settingsB) || recs[0].Seq != 4 {
		t.Fatalf("Decisions after the rotation = %+v, %v", recs, err)
	}
	t.Logf("stored history of 3 records with inputs: %d bytes", len(kv.Value))
}
