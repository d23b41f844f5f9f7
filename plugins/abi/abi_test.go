package abi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		raw  string
		want Version
	}{
		{"1.31.0", Version{Valid: true, Major: 1, Minor: 31}},
		{"v1.31", Version{Valid: true, Major: 1, Minor: 31}},
		{" 1.31.2 ", Version{Valid: true, Major: 1, Minor: 31, Patch: 2}},
		{"1", Version{Valid: true, Major: 1}},
		{"01.002.0", Version{Valid: true, Major: 1, Minor: 2}},
		{"1.31.0-rc.1", Version{Valid: true, Major: 1, Minor: 31, Prerelease: []string{"rc", "1"}}},
		{"1.31.0-rc.1+build.5", Version{Valid: true, Major: 1, Minor: 31, Prerelease: []string{"rc", "1"}}},
		{"1.31.0+meta", Version{Valid: true, Major: 1, Minor: 31}},
		{"", Version{}},
		{"banana", Version{}},
		{"1.2.3.4", Version{}},
		{"1..3", Version{}},
		{"1.2.3-", Version{}},
		{"1.2.3-01", Version{}},
		{"1.2.3-a..b", Version{}},
		{"1.2.3+", Version{}},
		{"1.2.x", Version{}},
		{"99999999999999999999.0.0", Version{}},
	}
	for _, tt := range tests {
		got := ParseVersion(tt.raw)
		tt.want.Raw = tt.raw
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseVersion(%q) = %+v, want %+v", tt.raw, got, tt.want)
		}
	}
}

func TestCompareVersion(t *testing.T) {
	// semver.org precedence example, in order.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.2.0", "1.19.0", "2.0.0"}
	for i := range order {
		for j := range order {
			got := CompareVersion(ParseVersion(order[i]), ParseVersion(order[j]))
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("CompareVersion(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestValidateStrategyName(t *testing.T) {
	for _, ok := range []string{"OldestEmulationVersion", "example.com/newest-binary-version", "a.b/C_d.e-1"} {
		if err := ValidateStrategyName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Newest", "/x", "example.com/", "Example.com/x", "ex_ample.com/x", "a.com/-x", "a.com/" + strings.Repeat("x", 64)} {
		if ValidateStrategyName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDecisionValidate(t *testing.T) {
	in := SampleInput(BuiltinStrategy)
	ok := []Decision{
		{Ranking: []string{"kcm-a", "kcm-c"}, Action: ActionPrefer, Preempt: true},
		{Ranking: []string{}, Action: ActionKeep},
		{Action: ActionAbstain},
	}
	for _, d := range ok {
		if err := d.Validate(in); err != nil {
			t.Errorf("%+v: %v", d, err)
		}
	}
	bad := map[string]Decision{
		"unknown action": {Action: "elect"},
		"unknown name":   {Ranking: []string{"kcm-z"}, Action: ActionPrefer},
		"duplicate":      {Ranking: []string{"kcm-a", "kcm-a"}, Action: ActionPrefer},
		"empty prefer":   {Action: ActionPrefer},
		"long reason":    {Action: ActionKeep, Reason: strings.Repeat("x", MaxReasonBytes+1)},
		"bad utf-8":      {Action: ActionKeep, Reason: "\xff"},
	}
	for name, d := range bad {
		if err := d.Validate(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestInfoValidate(t *testing.T) {
	if err := (&Info{Name: "example.com/x", Version: "1.0.0"}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, i := range []Info{{Name: "x", Version: "1"}, {Name: "example.com/x"}, {Name: "example.com/x", Version: "1 0"}} {
		if i.Validate() == nil {
			t.Errorf("%+v accepted", i)
		}
	}
}

// TestSamples: golden vectors are deterministic, sorted by name and
// survive a JSON round trip unchanged (what modules receive).
func TestSamples(t *testing.T) {
	a, b := Samples(BuiltinStrategy), Samples(BuiltinStrategy)
	if !reflect.DeepEqual(a, b) || len(a) < 6 {
		t.Fatal("samples are not deterministic")
	}
	for _, s := range a {
		for i := 1; i < len(s.Input.Candidates); i++ {
			if s.Input.Candidates[i-1].Name >= s.Input.Candidates[i].Name {
				t.Fatalf("%s: candidates not sorted by name", s.Name)
			}
		}
		raw, err := json.Marshal(s.Input)
		if err != nil {
			t.Fatal(err)
		}
		var back Input
		if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(&back, s.Input) {
			t.Fatalf("%s: round trip changed the input: %v", s.Name, err)
		}
	}
	if n := len(GenerateInput(1, 1000, "x").Candidates); n != 1000 {
		t.Fatalf("GenerateInput made %d candidates", n)
	}
}

// TestValidateSettings: settings are one JSON object within the bound.
func TestValidateSettings(t *testing.T) {
	for _, ok := range []string{`{}`, `{"zone":"a","n":[1,2]}`, " {\"a\":null}\n"} {
		if err := ValidateSettings([]byte(ok)); err != nil {
			t.Errorf("ValidateSettings(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{``, `null`, `[1]`, `"s"`, `{"a":1}{}`, `{"a":`, "{\"a\":\"\xff\"}",
		`{"a":"` + strings.Repeat("x", MaxSettingsBytes) + `"}`} {
		if err := ValidateSettings([]byte(bad)); err == nil {
			t.Errorf("ValidateSettings(%.30q) accepted it", bad)
		}
	}
	if err := (&Info{ABIMinor: ABIMinor + 1}).CheckABIMinor(); err == nil {
		t.Error("a module needing a newer ABI revision passed")
	}
	if err := (&Info{ABIMinor: ABIMinor}).CheckABIMinor(); err != nil {
		t.Error(err)
	}
}
