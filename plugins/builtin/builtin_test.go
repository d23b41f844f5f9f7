package builtin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/builtin"
	"github.com/leasehold/leasehold/plugins/host"
)

// buildOldest compiles oldest/oldest.c with the go:generate command. A
// missing toolchain fails the test: it is a dependency, not an option.
func buildOldest(t *testing.T) []byte {
	t.Helper()
	testneeds.Clang(t)
	// Reading the sources makes go test's cache depend on them (it cannot
	// see what clang reads).
	for _, src := range []string{"oldest/oldest.c", "../sdk/c/lease_strategy.h"} {
		if _, err := os.ReadFile(src); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "oldest.wasm")
	args := append(append([]string{}, builtin.BuildCommand[1:]...), "-o", out, "oldest/oldest.c")
	cmd := exec.Command(builtin.BuildCommand[0], args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build oldest.wasm: %v\n%s", err, b)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// differentialInputs are generated inputs of many sizes plus hand-made
// corner cases: pre-releases, ties on every key, invalid versions.
func differentialInputs() []*abi.Input {
	var ins []*abi.Input
	for seed := uint64(1); seed <= 400; seed++ {
		ins = append(ins, abi.GenerateInput(seed, int(seed%23), abi.BuiltinStrategy))
	}
	for _, n := range []int{64, 65, 100, 257, 1000} {
		ins = append(ins, abi.GenerateInput(uint64(n)*7919, n, abi.BuiltinStrategy))
	}
	for _, s := range abi.Samples(abi.BuiltinStrategy) {
		ins = append(ins, s.Input)
	}
	pre := abi.GenerateInput(99, 0, abi.BuiltinStrategy)
	for i, v := range []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.0-1", "1.0.0-01a", "1.0.0-999999999999999999999"} {
		pre.Candidates = append(pre.Candidates, abi.NewCandidate(fmt.Sprintf("c%02d", 10-i), "2.0.0", v, "x", 0))
	}
	ins = append(ins, pre)
	return ins
}

// TestBuiltinMatchesOracle runs the module rebuilt from source (served
// from a plugin directory, overriding the built-in) and the embedded one
// through the host and compares every Decision with election.Oldest.
func TestBuiltinMatchesOracle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "oldest-rebuilt.wasm"), buildOldest(t), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(ctx, host.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	h.Scan(ctx)
	rebuilt, ok := h.Lookup(abi.BuiltinStrategy)
	if !ok || rebuilt.Module().Builtin {
		t.Fatalf("rebuilt module not serving: %+v", h.Modules())
	}
	embedded, _ := h.Builtin(abi.BuiltinStrategy)
	for _, s := range []abi.Strategy{rebuilt, embedded} {
		for i, in := range differentialInputs() {
			got, err := s.Decide(ctx, in)
			if err != nil {
				t.Fatalf("%s input %d: %v", s.Module().SHA256[:12], i, err)
			}
			if want := election.Oldest(in); !reflect.DeepEqual(got, want) {
				t.Fatalf("input %d (%d candidates): module %s\n got %+v\nwant %+v", i, len(in.Candidates), s.Module().SHA256[:12], got, want)
			}
		}
	}
}

// TestBuiltinOrderIndependent: reversing the candidate list must not
// change the decision (upstream's tie-break depends on list order).
func TestBuiltinOrderIndependent(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	s, _ := h.Lookup(abi.BuiltinStrategy)
	for seed := uint64(1); seed <= 50; seed++ {
		in := abi.GenerateInput(seed, 30, abi.BuiltinStrategy)
		a, err := s.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for i, j := 0, len(in.Candidates)-1; i < j; i, j = i+1, j-1 {
			in.Candidates[i], in.Candidates[j] = in.Candidates[j], in.Candidates[i]
		}
		b, err := s.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: order changed the decision:\n%+v\n%+v", seed, a, b)
		}
	}
}
