package host

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/plugins/abi"
)

// engines are the two wazero engines a host can run strategies on: the
// compiler where this architecture has one, and the interpreter that 32-bit
// ARM always uses.
var engines = []struct {
	name        string
	interpreter bool
}{{"default", false}, {"interpreter", true}}

// TestEnginesDecideAlike: every shipped strategy (the embedded built-in and
// both examples, built from source) ranks the same candidates the same way
// on the interpreter as on the compiler, so a 32-bit ARM device elects the
// same leaders as an arm64 one.
func TestEnginesDecideAlike(t *testing.T) {
	testneeds.Slow(t, "builds a Go guest for wasip1 (most of a minute on a loaded 2-core machine)")
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "newest.wasm"), build(t, goExample))
	writeFile(t, filepath.Join(dir, "sticky.wasm"), build(t, cExample))
	names := []string{abi.BuiltinStrategy, "example.com/newest-binary-version", "example.com/sticky-holder"}

	rankings := map[string][][]string{}
	for _, e := range engines {
		// Equality, not speed, is under test: under qemu-user the
		// interpreter runs a Go guest's 100-candidate self-test for over
		// the default 1 s limit.
		h := quietHost(t, Options{Dir: dir, Interpreter: e.interpreter, CallLimit: time.Minute})
		h.Scan(ctx)
		for _, name := range names {
			s, ok := h.Lookup(name)
			if !ok {
				t.Fatalf("%s: %s not loaded: %+v", e.name, name, h.Modules())
			}
			for seed := uint64(1); seed <= 8; seed++ {
				d, err := s.Decide(ctx, abi.GenerateInput(seed, 20, name))
				if err != nil {
					t.Fatalf("%s: %s seed %d: %v", e.name, name, seed, err)
				}
				rankings[e.name+" "+name] = append(rankings[e.name+" "+name], d.Ranking)
			}
		}
	}
	for _, name := range names {
		a, b := rankings["default "+name], rankings["interpreter "+name]
		if len(a) != 8 || !slices.EqualFunc(a, b, slices.Equal[[]string]) {
			t.Errorf("%s decides differently on the interpreter:\ncompiler    %q\ninterpreter %q", name, a, b)
		}
	}
}

// TestInterpreterLimits: the sandbox's limits hold on the interpreter too:
// a spinning guest is cut off at the deadline, junk output and traps are
// failures, and the host keeps serving.
func TestInterpreterLimits(t *testing.T) {
	// The CallLimit bounds the load-time self-tests, which the interpreter
	// (slower still under -race on a busy machine) must pass; the spinning
	// decision gets a short deadline of its own, and the property is that
	// it, not the CallLimit, ends the call.
	const limit = time.Minute
	h, s := serveHostile(t, Options{CallLimit: limit, Interpreter: true},
		hostile(t, `(loop $spin (br $spin))`, "", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Decide(ctx, bigInput())
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if took := time.Since(start); took >= limit {
		t.Fatalf("interpreter ignored the 300ms deadline: %v", took)
	}
	assertHealthy(t, h)

	_, trap := serveHostile(t, Options{Interpreter: true}, hostile(t, `(unreachable)`, "", 1))
	if _, err := trap.Decide(context.Background(), bigInput()); err == nil {
		t.Fatalf("trap: err = %v", err)
	}
}

// BenchmarkDecideEngines measures one decision of the embedded built-in
// with 20 candidates on each engine: the figure the README reports for
// 32-bit ARM, where only the interpreter exists.
func BenchmarkDecideEngines(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name+"="+EngineName(e.interpreter), func(b *testing.B) {
			h := quietHost(b, Options{Interpreter: e.interpreter})
			s, _ := h.Lookup(abi.BuiltinStrategy)
			in := abi.GenerateInput(1, 20, abi.BuiltinStrategy)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Decide(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
