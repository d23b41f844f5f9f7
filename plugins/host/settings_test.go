package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/builtin"
	"github.com/leasehold/leasehold/plugins/signature"
	"github.com/leasehold/leasehold/plugins/status"
)

// servedSettings returns the settings (and their digest) of the module
// serving name.
func servedSettings(t *testing.T, h *Host, name string) (string, string) {
	t.Helper()
	s, ok := h.Lookup(name)
	if !ok {
		t.Fatalf("%s not served", name)
	}
	return string(s.(abi.Configured).Settings()), s.Module().SettingsSHA256
}

// TestSettingsHotReload walks a settings file through its life: added,
// changed, broken (the good settings keep serving), removed; each change
// reloads the module under the new digest.
func TestSettingsHotReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := quietHost(t, Options{Dir: dir})
	path := filepath.Join(dir, "hello.wasm")
	writeFile(t, path, hello(t, "1"))
	h.Scan(ctx)
	if got, sum := servedSettings(t, h, "example.com/hello"); got != "" || sum != "" {
		t.Fatalf("settings without a file: %q %q", got, sum)
	}
	v1 := []byte(`{"zone":"a"}`)
	writeFile(t, filepath.Join(dir, "hello.json"), v1)
	h.Scan(ctx)
	if got, sum := servedSettings(t, h, "example.com/hello"); got != string(v1) || sum != shaOf(v1) {
		t.Fatalf("after adding settings: %q %q", got, sum)
	}
	st := fileStatus(t, h, path)
	if st.SettingsSHA256 != shaOf(v1) || st.SettingsFile != filepath.Join(dir, "hello.json") {
		t.Fatalf("status %+v", st)
	}
	v2 := []byte(`{"zone":"b"}`)
	writeFile(t, filepath.Join(dir, "hello.json"), v2)
	h.Scan(ctx)
	if got, _ := servedSettings(t, h, "example.com/hello"); got != string(v2) {
		t.Fatalf("after changing settings: %q", got)
	}
	for _, bad := range [][]byte{[]byte(`{"zone":`), []byte(`["a"]`), []byte(`{"a":1} {}`),
		[]byte(`{"big":"` + strings.Repeat("x", abi.MaxSettingsBytes) + `"}`)} {
		writeFile(t, filepath.Join(dir, "hello.json"), bad)
		h.Scan(ctx)
		if got, _ := servedSettings(t, h, "example.com/hello"); got != string(v2) {
			t.Fatalf("bad settings %.20q replaced good ones: %q", bad, got)
		}
		if st := fileStatus(t, h, path); !strings.Contains(st.LoadError, "settings") || st.State != status.StateLoaded {
			t.Fatalf("bad settings %.20q: status %+v", bad, st)
		}
	}
	if err := os.Remove(filepath.Join(dir, "hello.json")); err != nil {
		t.Fatal(err)
	}
	h.Scan(ctx)
	if got, sum := servedSettings(t, h, "example.com/hello"); got != "" || sum != "" {
		t.Fatalf("after removing settings: %q %q", got, sum)
	}
	if st := fileStatus(t, h, path); st.LoadError != "" {
		t.Fatalf("status after removal %+v", st)
	}
}

// TestSettingsSigned: with trust keys, settings need a valid signature
// like modules; unsigned ones are refused and the module keeps its
// previous settings.
func TestSettingsSigned(t *testing.T) {
	ctx := context.Background()
	dir, keys := t.TempDir(), t.TempDir()
	key, _ := signingKey(t, keys, "fleet.key")
	ring, err := signature.LoadKeyring(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	h := quietHost(t, Options{Dir: dir, TrustKeys: ring})
	path := filepath.Join(dir, "hello.wasm")
	writeFile(t, path, hello(t, "1"))
	signFile(t, key, path)
	settings := filepath.Join(dir, "hello.json")
	writeFile(t, settings, []byte(`{"zone":"a"}`))
	h.Scan(ctx)
	if st := fileStatus(t, h, path); st.State == status.StateLoaded || !strings.Contains(st.State, "settings") {
		t.Fatalf("unsigned settings: status %+v", st)
	}
	signFile(t, key, settings)
	h.Scan(ctx)
	if got, _ := servedSettings(t, h, "example.com/hello"); got != `{"zone":"a"}` {
		t.Fatalf("signed settings not served: %q", got)
	}
	writeFile(t, settings, []byte(`{"zone":"b"}`)) // the old signature no longer matches
	h.Scan(ctx)
	if got, _ := servedSettings(t, h, "example.com/hello"); got != `{"zone":"a"}` {
		t.Fatalf("altered settings served: %q", got)
	}
	if st := fileStatus(t, h, path); st.LoadError == "" {
		t.Fatalf("altered settings not reported: %+v", st)
	}
}

// TestModuleNeedsNewerMinor: a module declaring an ABI revision newer
// than the host's is refused with a reason naming both.
func TestModuleNeedsNewerMinor(t *testing.T) {
	src, err := os.ReadFile("testdata/hello.wat")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(src), "VERSION", "1")
	newer := strings.Replace(text, `\"version\":\"1\"`, `\"version\":\"1\",\"abiMinor\":99`, 1)
	if newer == text {
		t.Fatal("testdata/hello.wat changed: cannot add abiMinor to its info")
	}
	_, err = Vet(context.Background(), wat(t, newer))
	want := fmt.Sprintf("module needs lease-strategy ABI 1.99, this server supports %d.%d", abi.ABIVersion, abi.ABIMinor)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Vet = %v", err)
	}
}

// TestReplay: the built-in module agrees with its own recorded
// decisions; a record that says otherwise is reported as a difference,
// and a record without input is skipped.
func TestReplay(t *testing.T) {
	ctx := context.Background()
	wasm := builtin.Modules()[0].Wasm
	in := abi.SampleInput(abi.BuiltinStrategy)
	d, _, err := TestRun(ctx, wasm, in)
	if err != nil {
		t.Fatal(err)
	}
	other := *d
	other.Ranking = append([]string(nil), d.Ranking...)
	slicesReverse(other.Ranking)
	rec := func(seq int64, dec *abi.Decision, withInput bool) RecordedChoice {
		r := RecordedChoice{Seq: seq, Time: time.Unix(seq, 0), Decision: dec}
		if withInput {
			r.Input = in
		}
		r.Module.Name = abi.BuiltinStrategy
		return r
	}
	hist := History{Leases: []LeaseHistory{{Namespace: "kube-system", Name: "kcm",
		Items: []RecordedChoice{rec(1, d, true), rec(2, &other, true), rec(3, d, false)}}}}
	rep, err := Replay(ctx, wasm, nil, hist)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if s.Decisions != 2 || s.Agree != 1 || s.Differ != 1 || s.Skipped != 1 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	if rep.Decisions[0].Verdict != VerdictAgree || rep.Decisions[1].Verdict != VerdictDiffer ||
		!strings.Contains(rep.Decisions[1].Differences, "ranking") {
		t.Fatalf("decisions %+v", rep.Decisions)
	}
	if _, err := Replay(ctx, wasm, []byte(`[1]`), hist); err == nil {
		t.Fatal("Replay took settings that are not an object")
	}
}

func slicesReverse(s []string) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
