package host

import (
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/plugins/signature"
)

// Options configures a Host; the zero value is usable (no plugin
// directory, in-memory compilation cache, defaults below).
type Options struct {
	// DataDir is the server's data directory; Dir and CacheDir default to
	// <DataDir>/plugins and <DataDir>/wasm-cache.
	DataDir string
	// Dir holds operator-supplied *.wasm modules; created if missing.
	// Empty (and no DataDir) means built-ins only.
	Dir string
	// CacheDir keeps compiled machine code across restarts (a Go guest
	// compiles in ~1 s cold, ~50 ms from the cache). Empty means in memory.
	CacheDir string
	// PollInterval is how often Run rescans Dir. Default 2 s.
	PollInterval time.Duration
	// CallLimit bounds each guest call whose caller set no deadline:
	// instantiation, _initialize and the export together, for the
	// load-time checks and self-test of a module, offline runs (Vet,
	// TestRun) and a Decide on a context without a deadline. A live
	// decision is bounded by the election controller's deadline instead
	// (election.Options.DecideTimeout, the server's --plugin-timeout), so
	// CallLimit must be at least that long or the self-test would reject
	// modules the deadline allows. Default DefaultCallLimit.
	CallLimit time.Duration
	// MemoryLimitPages caps a guest's linear memory in 64 KiB pages.
	// Default 1024 (64 MiB); expect host RSS of 3-4x that while a guest
	// grows to the cap.
	MemoryLimitPages uint32
	// FollowSymlinks lets a module, settings or signature file of Dir be a
	// symbolic link to a regular file. Without it only regular files are
	// read: anything else (a link, a FIFO, a device) is refused unopened.
	FollowSymlinks bool
	// MaxModuleBytes rejects larger .wasm files. Default 32 MiB.
	MaxModuleBytes int64
	// MaxOutputBytes caps what write_output accepts. Default 1 MiB.
	MaxOutputBytes int
	// TrustKeys, when set, makes the host refuse every module of Dir
	// (and settings file) without a valid FILE.sig by one of these keys,
	// a statement made for that file name, kind and strategy: a refused
	// module is never compiled, instantiated or called, and a refused new
	// version leaves the previous good one serving. Built-ins are part of
	// the binary and always trusted. Nil: every module is loaded, as
	// before signing existed.
	TrustKeys *signature.Keyring
	// Sequences, with TrustKeys, remembers the newest signed statement
	// accepted per strategy (module and settings) and refuses older ones
	// (rollbacks) and those under the operator's pinned minimums. Nil:
	// a memory of this process only (signature.NewSequences), without
	// pins.
	Sequences *signature.Sequences
	// OnChange, when set, is called after a scan changed the set of
	// serving modules (added, replaced or removed), so that the election
	// controller can re-decide with the new strategies at once.
	OnChange func()
	// Interpreter runs strategies on wazero's interpreter even where its
	// optimizing compiler exists (amd64, arm64): for tests that prove a
	// module decides the same on both, and for measuring 32-bit ARM's
	// engine on a development machine. Elsewhere the interpreter is used
	// regardless.
	Interpreter bool
	// Logger receives host and (rate-limited) guest logs. Default
	// slog.Default().
	Logger *slog.Logger
}

// DefaultDecisionTimeout is the recommended deadline of one decision for
// the election controller: 1 s on wazero's compiler, 5 s on its
// interpreter (32-bit ARM), where a Go-built guest spends about 300 ms
// starting its runtime on every call and a decision over 100 candidates
// takes over a second on an emulated ARMv7. The host does not apply it:
// the caller of Decide does, through its context.
func DefaultDecisionTimeout(interpreter bool) time.Duration {
	if interpreter || !CompilerSupported() {
		return 5 * time.Second
	}
	return time.Second
}

// DefaultCallLimit is the default CallLimit: above any sensible decision
// deadline, so that the self-test never rejects a module the deadline
// allows, yet short enough that a module spinning at load is rejected
// within seconds.
const DefaultCallLimit = 10 * time.Second

func (o Options) withDefaults() Options {
	if o.Dir == "" && o.DataDir != "" {
		o.Dir = datadir.At(o.DataDir).Plugins()
	}
	if o.CacheDir == "" && o.DataDir != "" {
		o.CacheDir = datadir.At(o.DataDir).WASMCache()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.CallLimit <= 0 {
		o.CallLimit = DefaultCallLimit
	}
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = 1024
	}
	if o.MaxModuleBytes <= 0 {
		o.MaxModuleBytes = 32 << 20
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
