package host

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/plugins/abi"
)

// The examples are built from source once per test binary: the Go one
// takes seconds.
var (
	goExample = sync.OnceValues(func() ([]byte, error) {
		out := filepath.Join(os.TempDir(), "leasehold-newest-binary-version-test.wasm")
		defer os.Remove(out)
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, ".")
		cmd.Dir = "../examples/newest-binary-version"
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, &buildError{err, b}
		}
		return os.ReadFile(out)
	})
	cExample = sync.OnceValues(func() ([]byte, error) {
		if _, err := testneeds.FindClang(); err != nil {
			return nil, err
		}
		out := filepath.Join(os.TempDir(), "leasehold-sticky-holder-test.wasm")
		defer os.Remove(out)
		// The one-line build command of the example's README.
		cmd := exec.Command("clang", "--target=wasm32", "-O2", "-ffreestanding", "-nostdlib", "-msimd128",
			"-mbulk-memory", "-Wall", "-Wextra", "-Werror", "-Wl,--no-entry", "-Wl,--strip-all", "-I../../sdk/c",
			"-o", out, "sticky.c")
		cmd.Dir = "../examples/sticky-holder"
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, &buildError{err, b}
		}
		return os.ReadFile(out)
	})
)

// trackSources reads the files an external toolchain compiles, so that go
// test's result cache is invalidated when they change (it only sees files
// the test process itself opens).
func trackSources(t *testing.T, globs ...string) {
	t.Helper()
	for _, g := range globs {
		paths, err := filepath.Glob(g)
		if err != nil || len(paths) == 0 {
			t.Fatalf("no sources match %s", g)
		}
		for _, p := range paths {
			if _, err := os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

func build(t *testing.T, f func() ([]byte, error)) []byte {
	t.Helper()
	b, err := f()
	if err != nil {
		testneeds.Check(t, err)
		t.Fatalf("build example: %v", err)
	}
	return b
}

// TestGoExample: the SDK-built Go module passes vet (its WASI imports are
// all in the allowed subset) and ranks the newest binary first, served
// from a plugin directory like any operator module.
func TestGoExample(t *testing.T) {
	testneeds.Slow(t, "builds a Go guest for wasip1 (most of a minute on a loaded 2-core machine)")
	ctx := context.Background()
	trackSources(t, "../examples/newest-binary-version/*.go", "../sdk/*.go", "../abi/*.go")
	wasm := build(t, goExample)
	rep, err := Vet(ctx, wasm)
	if err != nil {
		t.Fatalf("vet: %v\n%+v", err, rep)
	}
	if rep.Info.Name != "example.com/newest-binary-version" || !rep.HasInitialize {
		t.Fatalf("report: %+v", rep)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "newest.wasm"), wasm)
	var logs syncBuffer
	h := quietHost(t, Options{Dir: dir, Logger: newTextLogger(&logs)})
	h.Scan(ctx)
	s, ok := h.Lookup("example.com/newest-binary-version")
	if !ok {
		t.Fatalf("not loaded: %+v", h.Modules())
	}
	for seed := uint64(1); seed <= 10; seed++ {
		in := abi.GenerateInput(seed, 25, s.Name())
		d, err := s.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var newest abi.Version
		for _, c := range in.Candidates {
			if c.BinaryVersion.Valid && (newest.Raw == "" || abi.CompareVersion(c.BinaryVersion, newest) > 0) {
				newest = c.BinaryVersion
			}
		}
		first := candidate(in, d.Ranking[0])
		if abi.CompareVersion(first.BinaryVersion, newest) != 0 {
			t.Fatalf("seed %d: first %s has %s, newest is %s", seed, first.Name, first.BinaryVersion.Raw, newest.Raw)
		}
	}
	if st := moduleStatus(t, h, s.Name()); st.Calls != 10 || st.Errors != 0 {
		t.Fatalf("status: %+v", st)
	}
}

// TestCExample: the sticky-holder strategy keeps a live candidate holder
// and otherwise prefers the oldest candidate, without preempting.
func TestCExample(t *testing.T) {
	ctx := context.Background()
	trackSources(t, "../examples/sticky-holder/sticky.c", "../sdk/c/lease_strategy.h")
	wasm := build(t, cExample)
	rep, err := Vet(ctx, wasm)
	if err != nil {
		t.Fatalf("vet: %v\n%+v", err, rep)
	}
	if len(rep.Imports) == 0 || rep.Info.Name != "example.com/sticky-holder" {
		t.Fatalf("report: %+v", rep)
	}
	in := abi.Samples("example.com/sticky-holder")[2].Input // kcm-b holds, is a candidate
	d, _, err := TestRun(ctx, wasm, in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != abi.ActionKeep || d.Ranking[0] != "kcm-b" || len(d.Ranking) != 3 {
		t.Fatalf("live holder: %+v", d)
	}
	in.Lease.Expired = true
	if d, _, err = TestRun(ctx, wasm, in); err != nil || d.Action != abi.ActionPrefer || d.Preempt || d.Ranking[0] != "kcm-a" {
		t.Fatalf("expired lease: %+v %v", d, err)
	}
	big := abi.GenerateInput(11, 300, "example.com/sticky-holder")
	if d, _, err = TestRun(ctx, wasm, big); err != nil || len(d.Ranking) != 300 {
		t.Fatalf("300 candidates: %v", err)
	}
}

func candidate(in *abi.Input, name string) abi.Candidate {
	for _, c := range in.Candidates {
		if c.Name == name {
			return c
		}
	}
	return abi.Candidate{}
}
