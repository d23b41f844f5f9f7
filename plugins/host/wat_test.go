package host

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// wat compiles WebAssembly text with wabt's wat2wasm. A missing wabt fails
// the test (skips it under -short): the hostile-module suite must not
// silently disappear.
func wat(t testing.TB, src string) []byte {
	t.Helper()
	testneeds.Wat2wasm(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("wat2wasm", in, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s\n%s", err, b, src)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hello returns testdata/hello.wat built with the given version string.
func hello(t testing.TB, version string) []byte {
	t.Helper()
	src, err := os.ReadFile("testdata/hello.wat")
	if err != nil {
		t.Fatal(err)
	}
	return wat(t, strings.ReplaceAll(string(src), "VERSION", version))
}

// hostile builds a module named example.com/hostile that answers like
// hello on small inputs (so it passes the load-time self-test) and runs
// the WAT instructions in trigger when the input is over 200 kB, i.e. on
// the inputs bigInput makes. extra is spliced into the module (imports,
// exports, functions); abiVersion is what lease_strategy_abi_version says.
func hostile(t testing.TB, trigger, extra string, abiVersion int) []byte {
	t.Helper()
	return wat(t, `(module
  (import "lease_strategy" "read_input" (func $read_input (param i32 i32) (result i32)))
  (import "lease_strategy" "write_output" (func $write_output (param i32 i32)))
  `+extra+`
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"name\":\"example.com/hostile\",\"version\":\"1\"}")
  (data (i32.const 2048) "{\"ranking\":[],\"action\":\"abstain\",\"preempt\":false,\"reason\":\"ok\"}")
  (func (export "lease_strategy_abi_version") (result i32) (i32.const `+itoa(abiVersion)+`))
  (func (export "lease_strategy_info") (result i32)
    (call $write_output (i32.const 1024) (i32.const 44))
    (i32.const 0))
  (func (export "lease_strategy_decide") (result i32)
    (if (i32.gt_u (call $read_input (i32.const 0) (i32.const 0)) (i32.const 200000))
      (then `+trigger+`))
    (call $write_output (i32.const 2048) (i32.const 63))
    (i32.const 0)))`)
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// quietHost is a Host over dir with logs discarded unless the test fails.
func quietHost(t testing.TB, opts Options) *Host {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// syncBuffer is a log sink safe for the host's concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
