package host

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/builtin"
	"github.com/tetratelabs/wazero"
)

// BenchmarkDecide is one decision of the built-in module through the host
// (JSON encode, fresh instance, decide, strict decode, validation), with
// p50/p99 reported from per-call wall time.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	h, err := New(ctx, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(ctx)
	s, _ := h.Lookup(abi.BuiltinStrategy)
	for _, n := range []int{3, 100, 1000} {
		in := abi.GenerateInput(1, n, abi.BuiltinStrategy)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			lat := make([]time.Duration, 0, b.N)
			cpu := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start, c0 := time.Now(), threadCPU()
				if _, err := s.Decide(ctx, in); err != nil {
					b.Fatal(err)
				}
				cpu = append(cpu, threadCPU()-c0)
				lat = append(lat, time.Since(start))
			}
			reportPercentiles(b, "", lat)
			reportPercentiles(b, "cpu-", cpu)
		})
	}
}

// BenchmarkNativeOldest is the oracle on the same inputs, for scale.
func BenchmarkNativeOldest(b *testing.B) {
	for _, n := range []int{3, 100, 1000} {
		in := abi.GenerateInput(1, n, abi.BuiltinStrategy)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				election.Oldest(in)
			}
		})
	}
}

// reportPercentiles reports p50 and p99 of wall (or thread CPU) time.
func reportPercentiles(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), prefix+"p50-µs")
	b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds()), prefix+"p99-µs")
}

// BenchmarkCompile compiles a module cold (fresh runtime, empty cache
// directory) and warm (fresh runtime, cache directory already filled):
// what a server restart costs per module. The built-in is C (54 KB); the
// Go example (3.4 MB) shows the cost of a standard-Go guest.
func BenchmarkCompile(b *testing.B) {
	ctx := context.Background()
	goWasm, err := goExample()
	if err != nil {
		b.Fatal(err)
	}
	compile := func(b *testing.B, dir string, wasm []byte) {
		cache, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true).WithCompilationCache(cache))
		if _, err := rt.CompileModule(ctx, wasm); err != nil {
			b.Fatal(err)
		}
		_ = rt.Close(ctx)
		_ = cache.Close(ctx)
	}
	for _, m := range []struct {
		name string
		wasm []byte
	}{{"builtin", builtin.Modules()[0].Wasm}, {"go-example", goWasm}} {
		b.Run(m.name+"/cold", func(b *testing.B) {
			for b.Loop() {
				compile(b, b.TempDir(), m.wasm)
			}
		})
		b.Run(m.name+"/warm", func(b *testing.B) {
			dir := b.TempDir()
			compile(b, dir, m.wasm)
			for b.Loop() {
				compile(b, dir, m.wasm)
			}
		})
	}
}
