package status

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestModuleJSON: the UI's system endpoint and "leasehold plugin list"
// (and authors who decoded abi.ModuleStatus, removed in ABI 1.2) read
// these names; a renamed field would break them silently.
func TestModuleJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := Module{Name: "n", File: "f", SHA256: "s", Version: "v", Description: "d", Builtin: true, Active: true,
		LoadedAt: at, Calls: 1, Errors: 1, LastError: "e", LastErrorAt: at, LatencyP50: 1, LatencyP99: 1, LatencySum: 1,
		LoadError: "l", ABIVersion: "1", SignerKeyID: "k", State: StateLoaded, RefusedSHA256: "r",
		SettingsFile: "sf", SettingsSHA256: "ss", ABIMinor: 1, SignedSequence: 1}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range fields {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"abiMinor", "abiVersion", "active", "builtin", "calls", "description", "errors", "file", "lastError",
		"lastErrorAt", "latencyP50", "latencyP99", "latencySum", "loadError", "loadedAt", "name", "refusedSha256", "settingsFile",
		"settingsSha256", "sha256", "signedSequence", "signerKeyId", "state", "version"}
	if !slices.Equal(got, want) {
		t.Fatalf("Module's JSON names changed:\n got %s\nwant %s", strings.Join(got, ","), strings.Join(want, ","))
	}
}
