package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/tetratelabs/wazero"

	"github.com/leasehold/leasehold/plugins/abi"
)

// module is one loaded, self-tested strategy module: immutable apart from
// its counters. Lookup hands it out as an abi.Strategy; a reload
// swaps in a new *module and the old one is closed once its last call
// returns (refs).
type module struct {
	r        *runner
	info     abi.Info
	abi      int32 // what lease_strategy_abi_version answered
	sha      string
	file     string // path, or "builtin:<name>"
	builtin  bool
	compiled wazero.CompiledModule
	surface  surface
	loadedAt time.Time
	logger   *guestLogger
	stats    stats

	// settings is the strategy's settings document (abi.Input.Settings),
	// nil without one; settingsSHA is its sha256 and settingsFile its path.
	settings     []byte
	settingsSHA  string
	settingsFile string

	// refs is 1 (the registry's) plus one per running call; the compiled
	// module is closed when it drops to 0.
	refs atomic.Int64
}

var (
	_ abi.Strategy   = (*module)(nil)
	_ abi.Configured = (*module)(nil)
)

func (m *module) Name() string { return m.info.Name }

func (m *module) Module() abi.ModuleInfo {
	return abi.ModuleInfo{Name: m.info.Name, Version: m.info.Version, SHA256: m.sha, Builtin: m.builtin,
		SettingsSHA256: m.settingsSHA}
}

// Settings returns the module's settings document (abi.Configured).
func (m *module) Settings() json.RawMessage {
	if m.settings == nil {
		return nil
	}
	return json.RawMessage(m.settings)
}

func (m *module) acquire() bool {
	for {
		n := m.refs.Load()
		if n <= 0 {
			return false
		}
		if m.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (m *module) release() {
	if m.refs.Add(-1) == 0 {
		_ = m.compiled.Close(context.Background())
	}
}

// Decide runs lease_strategy_decide on in, in a fresh instance, until
// ctx's deadline, and returns the decoded answer. Its caller (the election
// controller) owns the rest: validating the answer against in, wrapping
// failures in abi.ErrStrategyFailed, logging and backing off; the host
// only counts calls, errors and latency for Modules.
func (m *module) Decide(ctx context.Context, in *abi.Input) (*abi.Decision, error) {
	if !m.acquire() {
		// Unloaded between Lookup and Decide: not the module's fault, but
		// the controller must fall back all the same.
		return nil, fmt.Errorf("module %s was unloaded", m.short())
	}
	defer m.release()
	d, tm, err := m.decide(ctx, in)
	m.stats.record(time.Duration(tm.Total), err)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", m.short(), err)
	}
	return d, nil
}

// decide runs lease_strategy_decide on in and decodes the answer strictly
// (one JSON document, no unknown fields); it does not validate it.
func (m *module) decide(ctx context.Context, in *abi.Input) (*abi.Decision, Timing, error) {
	cp := *in
	cp.ABIVersion, cp.ABIMinor = abi.ABIVersion, abi.ABIMinor
	if m.settings != nil {
		// The module's own settings win over any in the input: online the
		// controller sends none, offline (replay, test) a recorded input's
		// settings are used unless the module was loaded with its own.
		cp.Settings = m.settings
	}
	// goccy/go-json encodes the (trusted, host-built) input 3x faster than
	// encoding/json; the (untrusted) output is decoded by encoding/json.
	input, err := gojson.Marshal(&cp)
	if err != nil {
		return nil, Timing{}, fmt.Errorf("encode input: %w", err)
	}
	out, tm, err := m.r.invoke(ctx, m.compiled, m.logger, abi.ExportDecide, input, in.Seed)
	if err != nil {
		return nil, tm, err
	}
	var d abi.Decision
	if err := decodeStrict(out, &d); err != nil {
		return nil, tm, err
	}
	if d.Ranking == nil {
		d.Ranking = []string{}
	}
	return &d, tm, nil
}

func (m *module) short() string {
	if len(m.sha) > 12 {
		return m.sha[:12]
	}
	return m.sha
}

// load compiles and validates wasm: surface, ABI version, info, then the
// self-test on abi.Samples. The returned module holds one reference.
func (r *runner) load(ctx context.Context, wasm []byte, file string, builtin bool, log *slog.Logger) (*module, []SelfTestResult, error) {
	return r.loadModule(ctx, wasm, nil, file, builtin, log, true)
}

// loadWithSettings is load for a module with a settings document (nil:
// none), already validated by abi.ValidateSettings; the self-test runs
// with it.
func (r *runner) loadWithSettings(ctx context.Context, wasm, settings []byte, file string, log *slog.Logger) (*module, []SelfTestResult, error) {
	return r.loadModule(ctx, wasm, settings, file, false, log, true)
}

// loadUnchecked is load without the self-test, for running a module
// offline on an input of the author's choosing.
func (r *runner) loadUnchecked(ctx context.Context, wasm, settings []byte, log *slog.Logger) (*module, error) {
	m, _, err := r.loadModule(ctx, wasm, settings, "test", false, log, false)
	return m, err
}

func (r *runner) loadModule(ctx context.Context, wasm, settings []byte, file string, builtin bool, log *slog.Logger, selfTest bool) (*module, []SelfTestResult, error) {
	if int64(len(wasm)) > r.opts.MaxModuleBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidModule, len(wasm), r.opts.MaxModuleBytes)
	}
	sum := sha256.Sum256(wasm)
	m := &module{r: r, sha: hex.EncodeToString(sum[:]), file: file, builtin: builtin, loadedAt: time.Now()}
	if settings != nil {
		ss := sha256.Sum256(settings)
		m.settings, m.settingsSHA = settings, hex.EncodeToString(ss[:])
	}
	cm, err := r.rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: compile: %w", ErrInvalidModule, err)
	}
	m.compiled = cm
	m.refs.Store(1)
	ok := false
	defer func() {
		if !ok {
			m.release()
		}
	}()
	if m.surface, err = checkSurface(cm, r.opts.MemoryLimitPages); err != nil {
		return nil, nil, err
	}
	m.logger = newGuestLogger(log, "(loading)", m.sha)
	_, v, _, err := r.run(ctx, cm, m.logger, abi.ExportABIVersion, nil, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidModule, err)
	}
	if v != abi.ABIVersion {
		return nil, nil, fmt.Errorf("%w: module speaks lease-strategy ABI %d, this server supports %d", ErrInvalidModule, v, abi.ABIVersion)
	}
	m.abi = v
	out, _, err := r.invoke(ctx, cm, m.logger, abi.ExportInfo, nil, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: info: %w", ErrInvalidModule, err)
	}
	if len(out) > abi.MaxInfoBytes {
		return nil, nil, fmt.Errorf("%w: info is %d bytes, over %d", ErrInvalidModule, len(out), abi.MaxInfoBytes)
	}
	if err := decodeStrict(out, &m.info); err != nil {
		return nil, nil, fmt.Errorf("%w: info: %w", ErrInvalidModule, err)
	}
	if err := m.info.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidModule, err)
	}
	if err := m.info.CheckABIMinor(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidModule, err)
	}
	m.logger = newGuestLogger(log, m.info.Name, m.sha)
	var results []SelfTestResult
	if selfTest {
		if results, err = m.selfTest(ctx); err != nil {
			return nil, results, err
		}
	}
	ok = true
	return m, results, nil
}

// SelfTestResult is one golden vector's outcome.
type SelfTestResult struct {
	Sample   string     `json:"sample"`
	Action   abi.Action `json:"action,omitempty"`
	Ranked   int        `json:"ranked"`
	Duration Duration   `json:"duration"`
	Err      string     `json:"error,omitempty"`
}

func (m *module) selfTest(ctx context.Context) ([]SelfTestResult, error) {
	samples := abi.Samples(m.info.Name)
	results := make([]SelfTestResult, 0, len(samples))
	for _, s := range samples {
		d, tm, err := m.decide(ctx, s.Input)
		if err == nil {
			err = d.Validate(s.Input)
		}
		res := SelfTestResult{Sample: s.Name, Duration: tm.Total}
		if err != nil {
			res.Err = err.Error()
			results = append(results, res)
			return results, fmt.Errorf("%w: self-test %q: %w", ErrInvalidModule, s.Name, err)
		}
		res.Action, res.Ranked = d.Action, len(d.Ranking)
		results = append(results, res)
	}
	return results, nil
}
