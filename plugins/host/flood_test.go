package host

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// floodBytes is how much guest memory one flood names: inside the 64 MiB
// memory limit, as in the hostile review (a 514-byte module, one fd_write
// of 60 MiB of '\n', 1.55-3.1 GB of server RSS).
const floodBytes = 60 << 20

// floodRSSBound is what a flood may add to the process's peak RSS beyond
// the guest's own linear memory (MemoryLimitPages, 64 MiB by default).
const floodRSSBound = 64 << 20

// guestMemory is the default guest memory limit, which each flood call
// grows to; floodDecisions is how many flooding decisions a case makes.
const (
	guestMemory    = 64 << 20
	floodDecisions = 3
)

// floodShapes are the hostile output shapes: the WAT that fills memory at
// $base (60 MiB from 65536) and the fd_write iovec count and stream.
var floodShapes = map[string]struct {
	fill   string
	iovecs int
	fd     int
}{
	// One fd_write of 60 MiB of '\n' to stdout.
	"newline flood": {fill: `(memory.fill (i32.const 65536) (i32.const 10) (i32.const ` + strconv.Itoa(floodBytes) + `))`, iovecs: 1, fd: 1},
	// 16 iovecs naming the same 60 MiB of '\n' (960 MiB in one call), to
	// stderr, which is logged at info.
	"many iovecs": {fill: `(memory.fill (i32.const 65536) (i32.const 10) (i32.const ` + strconv.Itoa(floodBytes) + `))`, iovecs: 16, fd: 2},
	// One write of 60 MiB whose first 32 MiB are 16 million short
	// non-empty lines ("x\n"), to stderr: every line would be a log record.
	"huge single write": {fill: `(i32.store16 (i32.const 65536) (i32.const 0x0a78))
	    (local.set $n (i32.const 2))
	    (loop $double
	      (memory.copy (i32.add (i32.const 65536) (local.get $n)) (i32.const 65536) (local.get $n))
	      (local.set $n (i32.shl (local.get $n) (i32.const 1)))
	      (br_if $double (i32.le_u (i32.shl (local.get $n) (i32.const 1)) (i32.const ` + strconv.Itoa(floodBytes) + `))))`, iovecs: 1, fd: 2},
}

// floodModule builds a module named example.com/flood that, where is
// "load", floods in lease_strategy_info (so at load, in the self-test's
// first call, and in `plugin test`), or where is "decide", floods in
// lease_strategy_decide on inputs over 200 kB (bigInput).
func floodModule(t testing.TB, shape, where string) []byte {
	t.Helper()
	s, ok := floodShapes[shape]
	if !ok {
		t.Fatalf("no flood shape %q", shape)
	}
	var iovecs strings.Builder
	for i := range s.iovecs {
		fmt.Fprintf(&iovecs, "(i32.store (i32.const %d) (i32.const 65536)) (i32.store (i32.const %d) (i32.const %d))\n", 8*i, 8*i+4, floodBytes)
	}
	flood := `(func $flood (local $n i32)
	    (drop (memory.grow (i32.const ` + strconv.Itoa(floodBytes/65536+1) + `)))
	    ` + s.fill + `
	    ` + iovecs.String() + `
	    (drop (call $fd_write (i32.const ` + strconv.Itoa(s.fd) + `) (i32.const 0) (i32.const ` + strconv.Itoa(s.iovecs) + `) (i32.const 512))))`
	info, decide := "", ""
	if where == "load" {
		info = "(call $flood)"
	} else {
		decide = `(if (i32.gt_u (call $read_input (i32.const 0) (i32.const 0)) (i32.const 200000)) (then (call $flood)))`
	}
	return wat(t, `(module
  (import "lease_strategy" "read_input" (func $read_input (param i32 i32) (result i32)))
  (import "lease_strategy" "write_output" (func $write_output (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"name\":\"example.com/flood\",\"version\":\"1\"}")
  (data (i32.const 2048) "{\"ranking\":[],\"action\":\"abstain\",\"preempt\":false,\"reason\":\"ok\"}")
  `+flood+`
  (func (export "lease_strategy_abi_version") (result i32) (i32.const 1))
  (func (export "lease_strategy_info") (result i32)
    `+info+`
    (call $write_output (i32.const 1024) (i32.const 42))
    (i32.const 0))
  (func (export "lease_strategy_decide") (result i32)
    `+decide+`
    (call $write_output (i32.const 2048) (i32.const 63))
    (i32.const 0)))`)
}

const floodChildEnv = "LEASEHOLD_FLOOD_CHILD"

// TestHostileOutputMemory: a module that floods stdout or stderr costs
// the host a bounded amount of memory, at load, in decisions and in
// `plugin test`. Each case runs in a child process that reports its peak
// RSS (VmHWM) before and after the hostile calls: the host's own
// allocations are what matter, and a peak is what kills a device.
func TestHostileOutputMemory(t *testing.T) {
	if c := os.Getenv(floodChildEnv); c != "" {
		floodChild(t, c)
		return
	}
	if runtime.GOOS != "linux" {
		t.Log("VmHWM is Linux's; checking the allocations only")
	}
	places := []string{"load", "decide", "plugin test"}
	for i, shape := range []string{"newline flood", "many iovecs", "huge single write"} {
		for j, where := range places {
			// -short (the ARM runs under qemu, at a tenth of the speed)
			// runs each shape once and each place once; make test runs
			// all nine.
			if testing.Short() && j != i%len(places) {
				continue
			}
			t.Run(shape+" at "+where, func(t *testing.T) {
				mod := "load"
				if where == "decide" {
					mod = "decide"
				}
				file := filepath.Join(t.TempDir(), "flood.wasm")
				if err := os.WriteFile(file, floodModule(t, shape, mod), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestHostileOutputMemory$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), floodChildEnv+"="+where+"|"+file)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("child: %v\n%s", err, out)
				}
				var before, after, alloc int64
				found := false
				for _, line := range strings.Split(string(out), "\n") {
					if i := strings.Index(line, "flood-rss "); i >= 0 {
						if _, err := fmt.Sscan(line[i+len("flood-rss "):], &before, &after, &alloc); err != nil {
							t.Fatalf("bad child line %q: %v", line, err)
						}
						found = true
					}
				}
				if !found {
					t.Fatalf("child reported nothing:\n%s", out)
				}
				t.Logf("%s at %s: peak RSS %d MiB -> %d MiB (+%d MiB), %d MiB allocated by the host",
					shape, where, before>>20, after>>20, (after-before)>>20, alloc>>20)
				// The guest's memory (up to 64 MiB per call) is the
				// guest's; the host may add floodRSSBound on top of it.
				calls := int64(1)
				if where == "decide" {
					calls = floodDecisions
				}
				// Between decisions the last guest memory is garbage that
				// may still be resident when the next one is mapped.
				resident := int64(guestMemory)
				if calls > 1 {
					resident = 2 * guestMemory
				}
				if limit := resident + floodRSSBound; after-before > limit {
					t.Errorf("peak RSS grew by %d MiB, over %d MiB", (after-before)>>20, limit>>20)
				}
				if limit := calls*guestMemory + floodRSSBound; alloc > limit {
					t.Errorf("the host allocated %d MiB, over %d MiB", alloc>>20, limit>>20)
				}
			})
		}
	}
}

// floodChild runs one case in the child process and prints its peak RSS
// before and after, and the bytes allocated in between.
func floodChild(t *testing.T, c string) {
	where, file, _ := strings.Cut(c, "|")
	wasm, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var h *Host
	if where != "plugin test" {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "flood.wasm"), wasm, 0o644); err != nil {
			t.Fatal(err)
		}
		// Debug level: the stdout stream is read and logged too.
		var logs syncBuffer
		h = quietHost(t, Options{Dir: dir, Logger: newTextLogger(&logs)})
		if where == "decide" {
			h.Scan(ctx)
		}
	}
	runtime.GC()
	before := vmHWM(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0 := ms.TotalAlloc
	switch where {
	case "load":
		h.Scan(ctx)
		if _, ok := h.Lookup("example.com/flood"); !ok {
			t.Fatalf("flood module not loaded: %+v", h.Modules())
		}
	case "decide":
		s, ok := h.Lookup("example.com/flood")
		if !ok {
			t.Fatalf("flood module not loaded: %+v", h.Modules())
		}
		for range floodDecisions {
			if _, err := s.Decide(ctx, bigInput()); err != nil {
				t.Fatal(err)
			}
			// Each decision has a fresh 64 MiB guest memory: collected
			// between decisions, so that the peak is one decision's.
			runtime.GC()
		}
	case "plugin test":
		var stdout, stderr bytes.Buffer
		if code := PluginCommand.Run(ctx, []string{"test", file}, &stdout, &stderr); code != 0 {
			t.Fatalf("plugin test exited %d: %s", code, stderr.String())
		}
	}
	runtime.ReadMemStats(&ms)
	fmt.Printf("flood-rss %d %d %d\n", before, vmHWM(t), ms.TotalAlloc-alloc0)
}

// vmHWM is this process's peak resident set, in bytes (0 off Linux).
func vmHWM(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// TestGuestStreamBudget: stdout and stderr are read up to the call's and
// the module's byte budgets; the rest is dropped unread and counted, and
// the count is logged with the next line the module may log.
func TestGuestStreamBudget(t *testing.T) {
	var logs syncBuffer
	g := newGuestLogger(newTextLogger(&logs), "example.com/flood", "")
	flood := bytes.Repeat([]byte("x\n"), 1<<20) // 2 MiB
	w := g.stream("stderr")
	start := time.Now()
	for range 16 {
		if n, err := w.Write(flood); n != len(flood) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	// The burst, and what the bucket refilled while the writes ran (on a
	// loaded machine or under qemu they take a second or more).
	took := time.Since(start)
	limit := guestLogBurst + int(took.Seconds()*guestLogPerSec) + 1
	out := logs.String()
	if n := strings.Count(out, "msg=x"); n < 1 || n > limit {
		t.Fatalf("%d lines logged in %v, want 1..%d (a burst of %d and %d a second)", n, took, limit, guestLogBurst, guestLogPerSec)
	}
	// The module may log again once tokens come back: its next line
	// carries the dropped counts.
	g.mu.Lock()
	g.tokens, g.byteTokens = guestLogBurst, guestStreamBurst
	g.mu.Unlock()
	if _, err := g.stream("stderr").Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	// Reports come with allowed lines: add them up.
	var dropped, droppedBytes int64
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "guest log lines dropped") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "droppedBytes="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				droppedBytes += n
			} else if v, ok := strings.CutPrefix(f, "dropped="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				dropped += n
			}
		}
	}
	// 32 MiB written, at most the per-call budget read.
	if droppedBytes < int64(16*len(flood)-guestStreamPerCall) || dropped < 1 {
		t.Fatalf("reported %d lines and %d bytes dropped: want over %d bytes and some lines\n%s", dropped, droppedBytes, 16*len(flood)-guestStreamPerCall, logs.String())
	}
}
