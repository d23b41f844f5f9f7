package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/leasehold/leasehold/plugins/abi"
)

// ErrInvalidModule is wrapped by every load-time rejection (bad imports or
// exports, wrong ABI version, bad info, failed self-test). It wraps
// abi.ErrStrategyFailed, so callers need test only for that.
var ErrInvalidModule = fmt.Errorf("%w: invalid module", abi.ErrStrategyFailed)

// runner owns one wazero runtime with the host functions and WASI
// instantiated once; guest modules are compiled into it and instantiated
// anonymously, one instance per call.
type runner struct {
	opts      Options
	rt        wazero.Runtime
	cache     wazero.CompilationCache
	ownsCache bool
	mem       *memPool
}

// offlineCache is shared by the runtimes of Vet and TestRun, so that
// checking then running the same module compiles it once.
var offlineCache = sync.OnceValue(wazero.NewCompilationCache)

// wazeroVersionOnce makes wazero cache its version string before any two
// runtimes can be created concurrently: wazero (v1.12.0) memoizes it in an
// unsynchronized global on first use (NewCompilationCacheWithDir, the
// compiler engine), a data race when two hosts start at once (e.g. servers
// in one process, parallel tests). After that, later uses only read it.
var wazeroVersionOnce sync.Once

func newRunner(ctx context.Context, opts Options, shared wazero.CompilationCache) (*runner, error) {
	wazeroVersionOnce.Do(func() { _ = wazero.NewRuntime(ctx).Close(ctx) })
	cache := shared
	if cache != nil {
		// owned by the caller
	} else if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugins: compilation cache %s: %w", opts.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	cfg := newRuntimeConfig(opts.Interpreter).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(opts.MemoryLimitPages).
		WithCompilationCache(cache)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	r := &runner{opts: opts, rt: rt, cache: cache, ownsCache: shared == nil, mem: &memPool{}}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		r.close(ctx)
		return nil, fmt.Errorf("plugins: instantiate WASI: %w", err)
	}
	if err := r.instantiateHostModule(ctx); err != nil {
		r.close(ctx)
		return nil, err
	}
	return r, nil
}

// newRuntimeConfig picks wazero's engine. The optimizing compiler exists
// only for amd64 and arm64 (wazero panics with "unsupported architecture"
// if asked for it elsewhere, e.g. on 32-bit ARM); other architectures, and
// callers that ask for it, get the interpreter, which runs the same modules
// with the same limits, only more slowly.
func newRuntimeConfig(interpreter bool) wazero.RuntimeConfig {
	if interpreter || !CompilerSupported() {
		return wazero.NewRuntimeConfigInterpreter()
	}
	return wazero.NewRuntimeConfigCompiler()
}

// CompilerSupported reports whether strategies run on wazero's optimizing
// compiler on this architecture, rather than on its interpreter.
func CompilerSupported() bool {
	return runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"
}

// EngineName names the wazero engine a host with these options uses, for
// logs and the UI's system page.
func EngineName(interpreter bool) string {
	if interpreter || !CompilerSupported() {
		return "interpreter"
	}
	return "compiler"
}

func (r *runner) close(ctx context.Context) error {
	r.mem.closed.Store(true)
	err := r.rt.Close(ctx)
	if r.ownsCache {
		err = errors.Join(err, r.cache.Close(ctx))
	}
	return err
}

// callState is what the host functions of one call see, carried in the
// call's context because the host module is shared by all instances.
type callState struct {
	input  []byte
	output []byte
	wrote  bool
	max    int
	copied int // bytes write_output copied in this call, all calls together
	logger *guestLogger
}

// maxOutputCalls bounds what write_output copies in one call, as a
// multiple of MaxOutputBytes: a guest may rewrite its answer a few times.
const maxOutputCalls = 4

type callKey struct{}

func stateOf(ctx context.Context) *callState {
	st, _ := ctx.Value(callKey{}).(*callState)
	return st
}

var (
	i32 = api.ValueTypeI32
	// Signatures of the lease_strategy imports, checked at load.
	importSigs = map[string][2][]api.ValueType{
		abi.ImportReadInput:   {{i32, i32}, {i32}},
		abi.ImportWriteOutput: {{i32, i32}, nil},
		abi.ImportLog:         {{i32, i32, i32}, nil},
		abi.ImportLogEnabled:  {{i32}, {i32}},
	}
)

func (r *runner) instantiateHostModule(ctx context.Context) error {
	b := r.rt.NewHostModuleBuilder(abi.ImportModule)
	fn := func(name string, f api.GoModuleFunction) {
		sig := importSigs[name]
		b.NewFunctionBuilder().WithGoModuleFunction(f, sig[0], sig[1]).Export(name)
	}
	fn(abi.ImportReadInput, api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		st := stateOf(ctx)
		buf, limit := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		if st == nil {
			panic(errors.New("read_input outside a decision"))
		}
		if uint64(len(st.input)) <= uint64(limit) && len(st.input) > 0 {
			if !m.Memory().Write(buf, st.input) {
				panic(fmt.Errorf("read_input: buffer [%d,+%d) outside guest memory", buf, len(st.input)))
			}
		}
		stack[0] = api.EncodeU32(uint32(len(st.input)))
	}))
	fn(abi.ImportWriteOutput, api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		st := stateOf(ctx)
		buf, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		if st == nil {
			panic(errors.New("write_output outside a call"))
		}
		if uint64(n) > uint64(st.max) {
			panic(fmt.Errorf("write_output: %d bytes, more than the %d allowed", n, st.max))
		}
		// Each call replaces the output, so memory stays bounded; the
		// copying is bounded too, so that a loop of calls cannot keep the
		// host copying until the deadline.
		if st.copied += int(n); st.copied > maxOutputCalls*st.max {
			panic(fmt.Errorf("write_output: over %d bytes written in one call, all calls together", maxOutputCalls*st.max))
		}
		b, ok := m.Memory().Read(buf, n)
		if !ok {
			panic(fmt.Errorf("write_output: buffer [%d,+%d) outside guest memory", buf, n))
		}
		st.output = append(st.output[:0], b...) // Read returns a view: copy
		st.wrote = true
	}))
	fn(abi.ImportLog, api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		st := stateOf(ctx)
		level, buf, n := int32(api.DecodeI32(stack[0])), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
		if st == nil || st.logger == nil {
			return
		}
		if n > maxGuestLine {
			n = maxGuestLine
		}
		if b, ok := m.Memory().Read(buf, n); ok {
			st.logger.write(ctx, level, "log", b)
		}
	}))
	fn(abi.ImportLogEnabled, api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		st := stateOf(ctx)
		on := st != nil && st.logger != nil && st.logger.enabled(ctx, int32(api.DecodeI32(stack[0])))
		if on {
			stack[0] = 1
		} else {
			stack[0] = 0
		}
	}))
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("plugins: instantiate host module: %w", err)
	}
	return nil
}
