package host

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/leasehold/leasehold/plugins/abi"
)

// allowedWASI is the fixed subset of wasi_snapshot_preview1 a module may
// import: what the Go, wasi-libc and Rust runtimes need to start, write to
// stdout/stderr and read clocks and randomness. None of them reaches the
// outside world: there are no preopened directories (so the fd_prestat
// calls find nothing), stdin is empty, stdout/stderr go to a rate-limited
// logger, walltime is fake and random is a deterministic stream. Paths,
// sockets and directory calls are refused at load.
var allowedWASI = map[string]bool{
	"args_get": true, "args_sizes_get": true, "environ_get": true, "environ_sizes_get": true,
	"clock_time_get": true, "clock_res_get": true, "random_get": true,
	"sched_yield": true, "proc_exit": true, "poll_oneoff": true,
	"fd_write": true, "fd_read": true, "fd_close": true, "fd_seek": true,
	"fd_fdstat_get": true, "fd_fdstat_set_flags": true, "fd_prestat_get": true, "fd_prestat_dir_name": true,
}

const wasiModule = "wasi_snapshot_preview1"

// exportSigs are the required exports: all `() -> i32`.
var exportSigs = []string{abi.ExportABIVersion, abi.ExportInfo, abi.ExportDecide}

// surface is a module's checked import/export surface, for Vet reports.
type surface struct {
	imports       []string
	exports       []string
	hasInitialize bool
	memoryMin     uint32
}

// checkSurface enforces the ABI on a compiled module before it runs: only
// allowed imports with the right signatures, the required exports with
// exact signatures, an exported memory that fits the page limit.
func checkSurface(cm wazero.CompiledModule, limitPages uint32) (surface, error) {
	var s surface
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if imp := mod + "." + name; !slices.Contains(s.imports, imp) { // a module may import one function twice
			s.imports = append(s.imports, imp)
		}
		switch mod {
		case abi.ImportModule:
			want, ok := importSigs[name]
			if !ok {
				return s, fmt.Errorf("%w: imports unknown host function %s.%s", ErrInvalidModule, mod, name)
			}
			if err := sameSig(f, want[0], want[1]); err != nil {
				return s, fmt.Errorf("%w: import %s.%s: %w", ErrInvalidModule, mod, name, err)
			}
		case wasiModule:
			if !allowedWASI[name] {
				return s, fmt.Errorf("%w: imports %s.%s, which strategies may not use (no files, sockets or paths)", ErrInvalidModule, mod, name)
			}
		default:
			return s, fmt.Errorf("%w: imports %s.%s: only %q and a subset of %q are provided", ErrInvalidModule, mod, name, abi.ImportModule, wasiModule)
		}
	}
	if n := len(cm.ImportedMemories()); n > 0 {
		return s, fmt.Errorf("%w: imports a memory; a module must define and export its own", ErrInvalidModule)
	}
	exports := cm.ExportedFunctions()
	for name := range exports {
		s.exports = append(s.exports, name)
	}
	slices.Sort(s.exports)
	for _, name := range exportSigs {
		f, ok := exports[name]
		if !ok {
			return s, fmt.Errorf("%w: missing export %s (ABI v%d needs %s)", ErrInvalidModule, name, abi.ABIVersion, strings.Join(exportSigs, ", "))
		}
		if err := sameSig(f, nil, []api.ValueType{i32}); err != nil {
			return s, fmt.Errorf("%w: export %s: %w", ErrInvalidModule, name, err)
		}
	}
	if f, ok := exports[abi.ExportInitialize]; ok {
		if err := sameSig(f, nil, nil); err != nil {
			return s, fmt.Errorf("%w: export %s: %w", ErrInvalidModule, abi.ExportInitialize, err)
		}
		s.hasInitialize = true
	}
	mem, ok := cm.ExportedMemories()[abi.ExportMemory]
	if !ok {
		return s, fmt.Errorf("%w: missing exported memory %q", ErrInvalidModule, abi.ExportMemory)
	}
	s.memoryMin = mem.Min()
	if s.memoryMin > limitPages {
		return s, fmt.Errorf("%w: memory starts at %d pages, over the limit of %d", ErrInvalidModule, s.memoryMin, limitPages)
	}
	return s, nil
}

func sameSig(f api.FunctionDefinition, params, results []api.ValueType) error {
	if !slices.Equal(f.ParamTypes(), params) || !slices.Equal(f.ResultTypes(), results) {
		return fmt.Errorf("signature %s, want %s", sigString(f.ParamTypes(), f.ResultTypes()), sigString(params, results))
	}
	return nil
}

func sigString(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = api.ValueTypeName(t)
		}
		return strings.Join(out, ", ")
	}
	return "(" + names(params) + ") -> (" + names(results) + ")"
}
