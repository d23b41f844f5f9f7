package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/status"
)

// bigInput is over the 200 kB that arms the hostile modules.
func bigInput() *abi.Input {
	return abi.GenerateInput(3, 600, "example.com/hostile")
}

// serveHostile loads a hostile module from a plugin directory.
func serveHostile(t *testing.T, opts Options, wasm []byte) (*Host, abi.Strategy) {
	t.Helper()
	opts.Dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(opts.Dir, "hostile.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	h := quietHost(t, opts)
	h.Scan(context.Background())
	s, ok := h.Lookup("example.com/hostile")
	if !ok {
		t.Fatalf("hostile module not loaded: %+v", h.Modules())
	}
	return h, s
}

// assertHealthy checks that the host still decides with the built-in.
func assertHealthy(t *testing.T, h *Host) {
	t.Helper()
	s, _ := h.Lookup(abi.BuiltinStrategy)
	in := abi.SampleInput(abi.BuiltinStrategy)
	d, err := s.Decide(context.Background(), in)
	if err != nil {
		t.Fatalf("host unhealthy after a hostile module: %v", err)
	}
	if want := election.Oldest(in); d.Ranking[0] != want.Ranking[0] {
		t.Fatalf("built-in answered %q, want %q", d.Ranking, want.Ranking)
	}
	if err := h.Ready(); err != nil {
		t.Fatal(err)
	}
}

// TestHostileAtDecision: modules that pass the self-test and misbehave on
// a later input. Each failure is an error (the election controller wraps
// it in abi.ErrStrategyFailed), is counted, and the host keeps serving.
func TestHostileAtDecision(t *testing.T) {
	tests := []struct {
		name    string
		trigger string
		want    string
	}{
		{"trap", `unreachable`, "unreachable"},
		{"junk output", `(call $write_output (i32.const 1024) (i32.const 5)) (return (i32.const 0))`, "not a valid document"},
		{"non-zero return", `(call $write_output (i32.const 1024) (i32.const 8)) (return (i32.const 7))`, "returned 7"},
		{"no output", `(return (i32.const 0))`, "without calling write_output"},
		{"output too large", `(call $write_output (i32.const 0) (i32.const 2000000)) (return (i32.const 0))`, "more than the"},
		{"output outside memory", `(call $write_output (i32.const 65500) (i32.const 100)) (return (i32.const 0))`, "outside guest memory"},
		{"input outside memory", `(drop (call $read_input (i32.const 65000) (i32.const 1000000)))`, "outside guest memory"},
		{"memory bomb", `(loop $grow (br_if $grow (i32.ne (memory.grow (i32.const 64)) (i32.const -1)))) unreachable`, "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// None of these spins: a CallLimit of a minute lets the memory
			// bomb grow to the memory limit (the property under test) on a
			// loaded machine under -race, where it took 27 s.
			h, s := serveHostile(t, Options{CallLimit: time.Minute}, hostile(t, tt.trigger, "", 1))
			_, err := s.Decide(context.Background(), bigInput())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want an error mentioning %q", err, tt.want)
			}
			// Still fine on small inputs: a fresh instance per decision.
			if _, err := s.Decide(context.Background(), abi.SampleInput("example.com/hostile")); err != nil {
				t.Fatalf("next decision: %v", err)
			}
			st := moduleStatus(t, h, "example.com/hostile")
			if st.Errors != 1 || st.Calls != 2 || !strings.Contains(st.LastError, tt.want) {
				t.Fatalf("status = %+v", st)
			}
			assertHealthy(t, h)
		})
	}
}

// TestHostileJunkDecisions: output that is not one strict JSON document
// is the host's to refuse; a document that decodes but is no valid answer
// (unknown action, a name that is not a candidate) is handed to the
// caller, the election controller, which validates it against its input.
func TestHostileJunkDecisions(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown action":    `{"ranking":[],"action":"dance","preempt":false,"reason":""}`,
		"unknown candidate": `{"ranking":["nobody"],"action":"prefer","preempt":true,"reason":""}`,
		"unknown field":     `{"ranking":[],"action":"keep","preempt":false,"reason":"","extra":1}`,
		"trailing data":     `{"ranking":[],"action":"keep","preempt":false,"reason":""} {}`,
		"invalid utf-8":     "{\"ranking\":[],\"action\":\"keep\",\"preempt\":false,\"reason\":\"\xff\"}",
	} {
		decodes := name == "unknown action" || name == "unknown candidate"
		t.Run(name, func(t *testing.T) {
			data := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(doc)
			data = strings.ReplaceAll(data, "\xff", `\ff`)
			trigger := `(call $write_output (i32.const 4096) (i32.const ` + itoa(len(doc)) + `)) (return (i32.const 0))`
			h, s := serveHostile(t, Options{}, hostile(t, trigger, `(data (i32.const 4096) "`+data+`")`, 1))
			in := bigInput()
			d, err := s.Decide(context.Background(), in)
			if decodes {
				if err != nil || d.Validate(in) == nil {
					t.Fatalf("err = %v, decision %+v: want it decoded, and invalid", err, d)
				}
			} else if err == nil {
				t.Fatalf("decision %+v, want an error", d)
			}
			assertHealthy(t, h)
		})
	}
}

// TestHostileInfiniteLoop: the CallLimit stops a spinning guest, and a GC
// (which must stop every goroutine) completes while it spins: without
// WithCloseOnContextDone the whole process would freeze here until the
// guest's deadline. No fixed time is asserted (the suite passes on a busy
// machine): the GC must end before the spinning call does, and a caller's
// shorter deadline must end a call before the CallLimit would.
func TestHostileInfiniteLoop(t *testing.T) {
	// Long enough for the load-time self-tests on a loaded machine, short
	// enough to wait for once.
	const limit = 2 * time.Second
	h, s := serveHostile(t, Options{CallLimit: limit},
		hostile(t, `(loop $spin (br $spin))`, "", 1))
	gcDone := make(chan time.Time, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // the guest is spinning by now, or soon
		runtime.GC()
		gcDone <- time.Now()
	}()
	start := time.Now()
	_, err := s.Decide(context.Background(), bigInput())
	ended, took := time.Now(), time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "CallLimit") {
		t.Fatalf("err = %v, want a timeout at the CallLimit", err)
	}
	if took < limit {
		t.Fatalf("decision ended after %v, before its %v CallLimit", took, limit)
	}
	select {
	case at := <-gcDone:
		if !at.Before(ended) {
			t.Fatalf("runtime.GC finished %v after the spinning call ended: it waited for the guest", at.Sub(ended))
		}
	case <-time.After(time.Minute):
		t.Fatal("runtime.GC did not finish while a guest spun")
	}
	// The caller's own deadline is honoured too: it ends the call, not
	// the CallLimit.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := s.Decide(ctx, bigInput()); err == nil || strings.Contains(err.Error(), "CallLimit") {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	if took := time.Since(start); took >= limit {
		t.Fatalf("caller deadline ignored: %v", took)
	}
	assertHealthy(t, h)
}

// TestRejectedAtLoad: modules the host refuses before they ever serve.
func TestRejectedAtLoad(t *testing.T) {
	ok := `(return (i32.const 0))`
	tests := []struct {
		name string
		wasm func(t *testing.T) []byte
		want string
	}{
		{"wrong ABI version", func(t *testing.T) []byte { return hostile(t, ok, "", 2) }, "ABI 2"},
		{"forbidden WASI import", func(t *testing.T) []byte {
			return hostile(t, ok, `(import "wasi_snapshot_preview1" "path_open" (func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))`, 1)
		}, "path_open"},
		{"socket import", func(t *testing.T) []byte {
			return hostile(t, ok, `(import "wasi_snapshot_preview1" "sock_accept" (func (param i32 i32 i32) (result i32)))`, 1)
		}, "sock_accept"},
		{"unknown module import", func(t *testing.T) []byte {
			return hostile(t, ok, `(import "env" "now" (func (result i64)))`, 1)
		}, "env.now"},
		{"wrong import signature", func(t *testing.T) []byte {
			return hostile(t, ok, `(import "lease_strategy" "log" (func (param i64)))`, 1)
		}, "signature"},
		{"missing export", func(t *testing.T) []byte {
			return wat(t, `(module (memory (export "memory") 1) (func (export "lease_strategy_abi_version") (result i32) (i32.const 1)))`)
		}, "missing export"},
		{"wrong export signature", func(t *testing.T) []byte {
			return wat(t, `(module (memory (export "memory") 1)
			  (func (export "lease_strategy_abi_version") (result i32) (i32.const 1))
			  (func (export "lease_strategy_info") (result i32) (i32.const 0))
			  (func (export "lease_strategy_decide") (param i32) (result i32) (i32.const 0)))`)
		}, "signature"},
		{"memory over the limit", func(t *testing.T) []byte {
			return wat(t, `(module (memory (export "memory") 2000))`)
		}, "memory"},
		{"traps in self-test", func(t *testing.T) []byte {
			return wat(t, strings.Replace(string(mustRead(t, "testdata/hello.wat")), `(drop (call $read_input (i32.const 0) (i32.const 0)))`, `unreachable`, 1))
		}, "self-test"},
		{"spins in self-test", func(t *testing.T) []byte {
			return wat(t, strings.Replace(string(mustRead(t, "testdata/hello.wat")), `(drop (call $read_input (i32.const 0) (i32.const 0)))`, `(loop $l (br $l))`, 1))
		}, "timed out"},
		{"bad name", func(t *testing.T) []byte {
			return wat(t, strings.Replace(strings.ReplaceAll(string(mustRead(t, "testdata/hello.wat")), "VERSION", "1"), "example.com/hello", "NotQualified", 1))
		}, "without '/'"},
		{"garbage bytes", func(t *testing.T) []byte { return []byte("\x00asm\x01\x00\x00\x00garbage") }, "compile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := tt.wasm(t)
			// Vet has no CallLimit option: its caller's deadline bounds the
			// spinning module instead of the 10 s default.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			rep, err := Vet(ctx, wasm)
			if !errors.Is(err, ErrInvalidModule) || !errors.Is(err, abi.ErrStrategyFailed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Vet err = %v, want ErrInvalidModule mentioning %q", err, tt.want)
			}
			if rep.Problem == "" || rep.SHA256 == "" {
				t.Fatalf("report = %+v", rep)
			}
			// Through the directory: rejected, reported, nothing served.
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "bad.wasm"), wasm, 0o644); err != nil {
				t.Fatal(err)
			}
			h := quietHost(t, Options{Dir: dir, CallLimit: time.Second})
			h.Scan(context.Background())
			mods := h.Modules()
			last := mods[len(mods)-1]
			if last.LoadError == "" || last.Name != "" || len(*h.active.Load()) != 1 {
				t.Fatalf("bad module served or not reported: %+v", mods)
			}
			assertHealthy(t, h)
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func moduleStatus(t *testing.T, h *Host, name string) status.Module {
	t.Helper()
	for _, m := range h.Modules() {
		if m.Name == name && m.Active {
			return m
		}
	}
	t.Fatalf("no active module %q in %+v", name, h.Modules())
	return status.Module{}
}

// TestGuestLogFlood: a module logging in a loop is rate-limited (the
// dropped count is logged once the module may log again).
func TestGuestLogFlood(t *testing.T) {
	var logs syncBuffer
	extra := `(import "lease_strategy" "log" (func $log (param i32 i32 i32)))
	  (import "lease_strategy" "log_enabled" (func $log_enabled (param i32) (result i32)))
	  (data (i32.const 3072) "flood")
	  (global $i (mut i32) (i32.const 0))`
	trigger := `(if (call $log_enabled (i32.const -4)) (then
	    (loop $l
	      (call $log (i32.const 0) (i32.const 3072) (i32.const 5))
	      (global.set $i (i32.add (global.get $i) (i32.const 1)))
	      (br_if $l (i32.lt_u (global.get $i) (i32.const 500))))))`
	_, s := serveHostile(t, Options{Logger: newTextLogger(&logs)}, hostile(t, trigger, extra, 1))
	if _, err := s.Decide(context.Background(), bigInput()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(context.Background(), bigInput()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "msg=flood"); n < 1 || n > guestLogBurst+2 {
		t.Fatalf("%d guest lines logged for 1000 calls to log (burst %d)", n, guestLogBurst)
	}
	if !strings.Contains(out, "strategy=example.com/hostile") {
		t.Fatalf("guest lines not tagged with the strategy:\n%s", out)
	}
}
