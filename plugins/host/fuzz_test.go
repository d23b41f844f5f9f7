package host

import (
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/leasehold/leasehold/plugins/abi"
)

// FuzzModuleOutput feeds random bytes to the host's decoding and
// validation of what a strategy module returns (its Decision and Info):
// the host must never panic, and whatever it accepts must keep the
// contract the election controller relies on - a known action, ranking
// names that are candidates of the input and appear once, a bounded
// reason, a valid strategy name.
func FuzzModuleOutput(f *testing.F) {
	in := abi.SampleInput(abi.BuiltinStrategy)
	for _, s := range []string{
		`{"ranking":["kcm-a"],"action":"prefer","preempt":false,"reason":"oldest"}`,
		`{"ranking":[],"action":"keep","reason":""}`,
		`{"ranking":null,"action":"abstain"}`,
		`{"ranking":["kcm-a","kcm-a"],"action":"prefer"}`,
		`{"ranking":["nobody"],"action":"prefer"}`,
		`{"action":"prefer","extra":1}`,
		`{"action":"keep"} {"action":"keep"}`,
		`{"name":"OldestEmulationVersion","version":"1.0.0","description":"x"}`,
		`{"name":"example.com/newest","version":"` + string(make([]byte, 80)) + `"}`,
		"\xff\xfe", `[]`, `null`, `{"ranking":{"a":1}}`,
	} {
		f.Add([]byte(s))
	}
	names := map[string]bool{}
	for _, c := range in.Candidates {
		names[c.Name] = true
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		var d abi.Decision
		if err := decodeStrict(out, &d); err == nil && d.Validate(in) == nil {
			switch d.Action {
			case abi.ActionKeep, abi.ActionPrefer, abi.ActionAbstain:
			default:
				t.Fatalf("accepted action %q", d.Action)
			}
			seen := map[string]bool{}
			for _, n := range d.Ranking {
				if !names[n] || seen[n] {
					t.Fatalf("accepted ranking %q for candidates %v", d.Ranking, names)
				}
				seen[n] = true
			}
			if len(d.Reason) > abi.MaxReasonBytes || !utf8.ValidString(d.Reason) {
				t.Fatalf("accepted reason of %d bytes", len(d.Reason))
			}
			if d.Action == abi.ActionPrefer && len(d.Ranking) == 0 {
				t.Fatal("accepted prefer without a ranking")
			}
		}
		var info abi.Info
		if err := decodeStrict(out, &info); err == nil && info.Validate() == nil {
			if abi.ValidateStrategyName(info.Name) != nil || len(info.Version) > abi.MaxVersionBytes {
				t.Fatalf("accepted info %+v", info)
			}
			if slices.Contains([]byte(info.Name), 0) {
				t.Fatalf("accepted a NUL in the strategy name %q", info.Name)
			}
		}
	})
}
