package host

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/plugins/abi"
)

// The guest-language examples beyond Go and C, built from source with the
// commands their READMEs and docs/plugins.md give, once per test binary.
var (
	asExample = sync.OnceValues(func() ([]byte, error) {
		if _, err := testneeds.Find("npm", "Node.js 20 or later: apt-get install -y nodejs npm"); err != nil {
			return nil, err
		}
		out := filepath.Join(os.TempDir(), "leasehold-oldest-binary-version-test.wasm")
		defer os.Remove(out)
		// The example's own script: npm ci (the pinned compiler), then asc.
		cmd := exec.Command("./build.sh", out)
		cmd.Dir = "../examples/oldest-binary-version"
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, &buildError{err, b}
		}
		return os.ReadFile(out)
	})
	rustExample = sync.OnceValues(func() ([]byte, error) {
		rustc, err := testneeds.RustcWasm32()
		if err != nil {
			return nil, err
		}
		out := filepath.Join(os.TempDir(), "leasehold-first-name-test.wasm")
		defer os.Remove(out)
		// The one-line build command of the example's README: plain rustc,
		// no cargo, no crates.
		cmd := exec.Command(rustc, "--edition", "2021", "--crate-type", "cdylib", "--target", "wasm32-unknown-unknown",
			"-C", "opt-level=s", "-C", "strip=symbols", "-D", "warnings", "-o", out, "first_name.rs")
		cmd.Dir = "../examples/first-name"
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, &buildError{err, b}
		}
		return os.ReadFile(out)
	})
)

// oddNames are candidate names that test a guest's JSON strings: Go's
// encoder escapes < > & as \u003c..., quotes and backslashes, and sends
// other non-ASCII text (including characters beyond the BMP) as UTF-8. A
// guest must hand each back so that it decodes to the same name.
var oddNames = []string{`a"quote\slash`, "<tag>&amp", "zone-é-☃-😀"}

// withOddNames adds acked candidates with oddNames and valid versions to in,
// keeping the candidates sorted by name as the host sends them.
func withOddNames(in *abi.Input, binary string) *abi.Input {
	for i, name := range oddNames {
		c := abi.NewCandidate(name, binary, binary, in.Strategy, in.NowUs-int64(i+1)*1_000000)
		c.Labels = map[string]string{"note": "tab\tnewline\nquote\"", "emoji": "😀"}
		in.Candidates = append(in.Candidates, c)
	}
	slices.SortFunc(in.Candidates, func(a, b abi.Candidate) int { return strings.Compare(a.Name, b.Name) })
	return in
}

// vacant reports whether in's lease can be granted (no live holder).
func vacant(in *abi.Input) bool {
	return !in.Lease.Exists || in.Lease.Expired || in.Lease.Holder == ""
}

// serve loads wasm from a plugin directory like an operator's module and
// returns the strategy it serves under name.
func serve(t *testing.T, wasm []byte, name string) (*Host, abi.Strategy) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "module.wasm"), wasm)
	// Info and above: the examples log every decision at debug level.
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := quietHost(t, Options{Dir: dir, Logger: logger})
	h.Scan(context.Background())
	s, ok := h.Lookup(name)
	if !ok {
		t.Fatalf("%s not loaded: %+v", name, h.Modules())
	}
	return h, s
}

// TestAssemblyScriptExample: the AssemblyScript example, built by its
// script with the pinned compiler, passes vet (only lease_strategy imports)
// and ranks the acked candidates with valid binary versions oldest first,
// preferring the first on a vacant lease and never preempting.
func TestAssemblyScriptExample(t *testing.T) {
	ctx := context.Background()
	trackSources(t, "../examples/oldest-binary-version/assembly/*.ts", "../examples/oldest-binary-version/build.sh",
		"../examples/oldest-binary-version/package*.json", "../sdk/assemblyscript/*.ts")
	wasm := build(t, asExample)
	const name = "example.com/oldest-binary-version"
	rep, err := Vet(ctx, wasm)
	if err != nil {
		t.Fatalf("vet: %v\n%+v", err, rep)
	}
	if rep.Info.Name != name || rep.Info.Version != "0.1.0" {
		t.Fatalf("report: %+v", rep)
	}
	for _, imp := range rep.Imports {
		if !strings.HasPrefix(imp, abi.ImportModule+".") {
			t.Fatalf("imports %s: an AssemblyScript strategy needs only lease_strategy functions", imp)
		}
	}
	want := func(in *abi.Input) abi.Decision {
		var elig []abi.Candidate
		for _, c := range in.Candidates {
			if c.Acked && c.BinaryVersion.Valid {
				elig = append(elig, c)
			}
		}
		slices.SortStableFunc(elig, func(a, b abi.Candidate) int {
			if c := abi.CompareVersion(a.BinaryVersion, b.BinaryVersion); c != 0 {
				return c
			}
			if a.CreationTimeUs != b.CreationTimeUs {
				return cmp.Compare(a.CreationTimeUs, b.CreationTimeUs)
			}
			return strings.Compare(a.Name, b.Name)
		})
		d := abi.Decision{Ranking: []string{}, Action: abi.ActionKeep}
		for _, c := range elig {
			d.Ranking = append(d.Ranking, c.Name)
		}
		if len(elig) > 0 && vacant(in) {
			d.Action = abi.ActionPrefer
		}
		return d
	}
	h, s := serve(t, wasm, name)
	var inputs []*abi.Input
	for _, sample := range abi.Samples(name) {
		inputs = append(inputs, sample.Input)
	}
	for seed := uint64(1); seed <= 12; seed++ {
		inputs = append(inputs, abi.GenerateInput(seed, 30, name))
	}
	// The odd names with the oldest binary, so that one of them leads.
	inputs = append(inputs, withOddNames(abi.GenerateInput(99, 10, name), "1.0.0"))
	for i, in := range inputs {
		got, err := s.Decide(ctx, in)
		if err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
		w := want(in)
		if !slices.Equal(got.Ranking, w.Ranking) || got.Action != w.Action || got.Preempt {
			t.Fatalf("input %d (lease %+v):\n got %s %v %v\nwant %s %v", i, in.Lease, got.Action, got.Preempt, got.Ranking, w.Action, w.Ranking)
		}
		if got.Action == abi.ActionPrefer && !strings.Contains(got.Reason, got.Ranking[0]+" has the oldest binary") {
			t.Fatalf("input %d: reason %q", i, got.Reason)
		}
	}
	if d, err := s.Decide(ctx, inputs[len(inputs)-1]); err != nil || !slices.Contains(oddNames, d.Ranking[0]) {
		t.Fatalf("odd names: %v %v", d, err)
	}
	// Settings: {"drain": NAME} leaves NAME out; other members, other
	// types and escapes in the document are passed over.
	in := abi.GenerateInput(5, 20, name)
	first := want(in).Ranking[0]
	for _, doc := range []string{`{"drain":` + strconv.Quote(first) + `}`,
		`{"note":{"a":[1,2,{"b":"\"}"}]},"x":true,"drain":` + strconv.Quote(first) + `}`} {
		in.Settings = json.RawMessage(doc)
		got, err := s.Decide(ctx, in)
		if err != nil {
			t.Fatalf("settings %s: %v", doc, err)
		}
		if w := want(in).Ranking; slices.Contains(got.Ranking, first) || len(got.Ranking) != len(w)-1 {
			t.Fatalf("settings %s: ranking %v still has %s (without settings: %v)", doc, got.Ranking, first, w)
		}
	}
	in.Settings = json.RawMessage(`{"drain":7}`)
	if got, err := s.Decide(ctx, in); err != nil || got.Ranking[0] != first {
		t.Fatalf("a drain that is not a string is ignored: %v %v", got, err)
	}
	if st := moduleStatus(t, h, name); st.Calls != uint64(len(inputs)+4) || st.Errors != 0 {
		t.Fatalf("status: %+v", st)
	}
	_, timing, err := TestRun(ctx, wasm, abi.GenerateInput(7, 100, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("AssemblyScript: %d bytes; one decision over 100 candidates: %v", len(wasm), timing)
}

// TestRustExample: the Rust example, built with plain rustc (Debian's
// rustc and libstd-rust-dev-wasm32, no cargo), ranks the acked candidates
// by name and prefers the first only on a vacant lease.
func TestRustExample(t *testing.T) {
	ctx := context.Background()
	trackSources(t, "../examples/first-name/first_name.rs")
	wasm := build(t, rustExample)
	const name = "example.com/first-name"
	rep, err := Vet(ctx, wasm)
	if err != nil {
		t.Fatalf("vet: %v\n%+v", err, rep)
	}
	if rep.Info.Name != name {
		t.Fatalf("report: %+v", rep)
	}
	h, s := serve(t, wasm, name)
	var inputs []*abi.Input
	for _, sample := range abi.Samples(name) {
		inputs = append(inputs, sample.Input)
	}
	for seed := uint64(1); seed <= 12; seed++ {
		inputs = append(inputs, abi.GenerateInput(seed, 30, name))
	}
	inputs = append(inputs, withOddNames(abi.GenerateInput(99, 10, name), "1.0.0"))
	for i, in := range inputs {
		got, err := s.Decide(ctx, in)
		if err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
		want := []string{}
		for _, c := range in.Candidates {
			if c.Acked {
				want = append(want, c.Name)
			}
		}
		slices.Sort(want)
		action := abi.ActionKeep
		if len(want) > 0 && vacant(in) {
			action = abi.ActionPrefer
		}
		if !slices.Equal(got.Ranking, want) || got.Action != action || got.Preempt {
			t.Fatalf("input %d (lease %+v):\n got %s %v %v\nwant %s %v", i, in.Lease, got.Action, got.Preempt, got.Ranking, action, want)
		}
	}
	if st := moduleStatus(t, h, name); st.Calls != uint64(len(inputs)) || st.Errors != 0 {
		t.Fatalf("status: %+v", st)
	}
	_, timing, err := TestRun(ctx, wasm, abi.GenerateInput(7, 100, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Rust: %d bytes; one decision over 100 candidates: %v", len(wasm), timing)
}

// TestGoSDKOutsideRepo: a strategy author outside this repository uses the
// Go SDK as a module dependency: the Go example, copied into a directory of
// its own with a go.mod that requires the SDK module, builds and runs. The
// SDK is not published yet, so the go.mod replaces it (and abi) with this
// checkout; once tagged, `go get .../plugins/sdk@v0.x` takes their place.
func TestGoSDKOutsideRepo(t *testing.T) {
	testneeds.Slow(t, "builds a Go guest for wasip1 (most of a minute on a loaded 2-core machine)")
	ctx := context.Background()
	sdkDir, err := filepath.Abs("../sdk")
	if err != nil {
		t.Fatal(err)
	}
	abiDir, err := filepath.Abs("../abi")
	if err != nil {
		t.Fatal(err)
	}
	trackSources(t, "../examples/newest-binary-version/main.go", "../sdk/*.go", "../sdk/go.mod", "../abi/*.go", "../abi/go.mod")
	dir := t.TempDir()
	src, err := os.ReadFile("../examples/newest-binary-version/main.go")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "main.go"), src)
	// What docs/plugins.md tells an author to run, with the replaces that
	// stand in for the module proxy until the SDK is tagged.
	gomod := "module example.com/newest-binary-version\n\ngo 1.24\n\n" +
		"require github.com/leasehold/leasehold/plugins/sdk v0.1.0\n\n" +
		"replace github.com/leasehold/leasehold/plugins/sdk => " + sdkDir + "\n\n" +
		"replace github.com/leasehold/leasehold/plugins/abi => " + abiDir + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), []byte(gomod))
	// Offline and outside any workspace: only the two modules can be used.
	env := append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod")
	run := func(extra []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, append(slices.Clone(env), extra...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	run(nil, "mod", "tidy")
	if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || !strings.Contains(string(b), "github.com/leasehold/leasehold/plugins/abi v0.1.0") {
		t.Fatalf("go mod tidy did not add the abi module (the example imports it, the SDK requires it):\n%s", b)
	}
	// The SDK alone must not pull in the server's dependencies.
	if mods := run(nil, "list", "-m", "all"); strings.Count(strings.TrimSpace(mods), "\n") != 2 {
		t.Fatalf("the SDK brings in more than abi:\n%s", mods)
	}
	run(nil, "vet", ".")
	run([]string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-o", "mine.wasm", ".")
	wasm, err := os.ReadFile(filepath.Join(dir, "mine.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	_, s := serve(t, wasm, "example.com/newest-binary-version")
	in := abi.SampleInput(s.Name())
	d, err := s.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// The sample's kcm-c runs 1.32.0-rc.1, the newest binary.
	if d.Ranking[0] != "kcm-c" || d.Action != abi.ActionPrefer || !d.Preempt {
		t.Fatalf("decision: %+v", d)
	}
}
