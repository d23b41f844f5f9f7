package host

import (
	"context"
	"encoding/json"
	"regexp"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/plugins/abi"
)

func TestBuiltinServes(t *testing.T) {
	h := quietHost(t, Options{})
	if err := h.Ready(); err != nil {
		t.Fatal(err)
	}
	s, ok := h.Lookup(abi.BuiltinStrategy)
	if !ok {
		t.Fatal("built-in missing")
	}
	m := s.Module()
	if !m.Builtin || len(m.SHA256) != 64 || m.Version == "" || s.Name() != abi.BuiltinStrategy {
		t.Fatalf("Module() = %+v", m)
	}
	if _, ok := h.Lookup("example.com/none"); ok {
		t.Fatal("unknown name found")
	}
	in := abi.SampleInput(abi.BuiltinStrategy)
	d, err := s.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if want := election.Oldest(in); d.Reason != want.Reason || d.Ranking[0] != want.Ranking[0] {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	st := h.Modules()[0]
	if st.Calls != 1 || st.Errors != 0 || st.LatencyP99 <= 0 || !st.Active || !st.Builtin {
		t.Fatalf("status = %+v", st)
	}
}

// TestConcurrentDecisions: one Strategy used from many goroutines (each
// decision gets its own instance; sharing one would crash the process).
func TestConcurrentDecisions(t *testing.T) {
	h := quietHost(t, Options{})
	s, _ := h.Lookup(abi.BuiltinStrategy)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				in := abi.GenerateInput(uint64(g*100+i), 20, abi.BuiltinStrategy)
				d, err := s.Decide(context.Background(), in)
				if err != nil {
					t.Error(err)
					return
				}
				if want := election.Oldest(in); len(d.Ranking) != len(want.Ranking) || (len(d.Ranking) > 0 && d.Ranking[0] != want.Ranking[0]) {
					t.Errorf("goroutine %d: got %v want %v", g, d.Ranking, want.Ranking)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	if st := h.Modules()[0]; st.Calls != 200 {
		t.Fatalf("calls = %d", st.Calls)
	}
}

func TestClosedHost(t *testing.T) {
	h := quietHost(t, Options{})
	s, _ := h.Lookup(abi.BuiltinStrategy)
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.Ready() == nil {
		t.Fatal("closed host is ready")
	}
	if _, ok := h.Lookup(abi.BuiltinStrategy); ok {
		t.Fatal("closed host still serves")
	}
	if _, err := s.Decide(context.Background(), abi.SampleInput(abi.BuiltinStrategy)); err == nil {
		t.Fatalf("decision on closed host: %v", err)
	}
}

func TestVetAndTestRun(t *testing.T) {
	ctx := context.Background()
	wasm := hello(t, "1.2.3")
	rep, err := Vet(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Info.Name != "example.com/hello" || rep.Info.Version != "1.2.3" || len(rep.SelfTest) != len(abi.Samples("")) ||
		len(rep.Imports) != 2 || rep.Problem != "" || rep.CompileTime <= 0 {
		t.Fatalf("report = %+v", rep)
	}
	d, tm, err := TestRun(ctx, wasm, nil)
	if err != nil || d.Action != abi.ActionAbstain || tm.Total <= 0 {
		t.Fatalf("TestRun = %+v %+v %v", d, tm, err)
	}
	in := abi.GenerateInput(5, 3, "example.com/hello")
	if d, _, err = TestRun(ctx, wasm, in); err != nil || d.Reason != "hello" {
		t.Fatalf("TestRun(in) = %+v, %v", d, err)
	}
	// The report a person reads: durations in human units, each import once.
	out, _ := json.Marshal(rep)
	if !regexp.MustCompile(`"compileTime":"[0-9.]+(ns|µs|ms|s)"`).Match(out) || !regexp.MustCompile(`"duration":"[0-9.]+(ns|µs|ms|s)"`).Match(out) {
		t.Errorf("vet report durations are not in human units: %s", out)
	}
	seen := map[string]bool{}
	for _, imp := range rep.Imports {
		if seen[imp] {
			t.Errorf("import %s listed twice", imp)
		}
		seen[imp] = true
	}
}

func TestDetRandReproducible(t *testing.T) {
	a, b := make([]byte, 20), make([]byte, 20)
	_, _ = newDetRand(7).Read(a)
	_, _ = newDetRand(7).Read(b)
	if string(a) != string(b) || string(a) == string(make([]byte, 20)) {
		t.Fatalf("detRand: %x vs %x", a, b)
	}
}
