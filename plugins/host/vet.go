package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
)

// VetReport is what `leasehold plugin vet` prints.
type VetReport struct {
	SHA256        string           `json:"sha256"`
	Size          int              `json:"size"`
	Info          abi.Info         `json:"info"`
	Imports       []string         `json:"imports"`
	Exports       []string         `json:"exports"`
	HasInitialize bool             `json:"hasInitialize"`
	MemoryPages   uint32           `json:"memoryPages"`
	CompileTime   Duration         `json:"compileTime"`
	SelfTest      []SelfTestResult `json:"selfTest"`
	// Problem is the first reason the module would be rejected, or "".
	Problem string `json:"problem,omitempty"`
}

// Vet checks wasm against the ABI exactly as the server would before
// serving it: imports and exports, ABI version, info, and the self-test on
// the golden samples. The error, if any, wraps ErrInvalidModule (and so
// abi.ErrStrategyFailed); the report is filled as far as vetting got.
func Vet(ctx context.Context, wasm []byte) (VetReport, error) {
	sum := sha256.Sum256(wasm)
	rep := VetReport{SHA256: hex.EncodeToString(sum[:]), Size: len(wasm)}
	r, err := newRunner(ctx, Options{Logger: slog.New(slog.DiscardHandler)}.withDefaults(), offlineCache())
	if err != nil {
		return rep, err
	}
	defer r.close(ctx)
	start := time.Now()
	if cm, err := r.rt.CompileModule(ctx, wasm); err == nil {
		rep.CompileTime = Duration(time.Since(start))
		s, _ := checkSurface(cm, r.opts.MemoryLimitPages)
		rep.Imports, rep.Exports, rep.HasInitialize, rep.MemoryPages = s.imports, s.exports, s.hasInitialize, s.memoryMin
		// Closed only after the load below: closing a compiled module
		// drops its machine code from the shared cache, and the load would
		// compile it all again (seconds for a Go guest).
		defer cm.Close(ctx)
	}
	m, results, err := r.load(ctx, wasm, "vet", false, r.opts.Logger)
	rep.SelfTest = results
	if err != nil {
		rep.Problem = err.Error()
		return rep, err
	}
	rep.Info = m.info
	m.release()
	return rep, nil
}

// TestRun loads wasm (checks and ABI version, not the self-test) and runs
// one decision on in, or on abi.SampleInput when in is nil, under the
// server's default decision deadline. Guest logs go
// to logger (nil: discarded), so an author sees what the module printed.
func TestRun(ctx context.Context, wasm []byte, in *abi.Input) (*abi.Decision, Timing, error) {
	return testRun(ctx, wasm, in, nil)
}

func testRun(ctx context.Context, wasm []byte, in *abi.Input, logger *slog.Logger) (*abi.Decision, Timing, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r, err := newRunner(ctx, Options{Logger: logger}.withDefaults(), offlineCache())
	if err != nil {
		return nil, Timing{}, err
	}
	defer r.close(ctx)
	m, err := r.loadUnchecked(ctx, wasm, nil, logger)
	if err != nil {
		return nil, Timing{}, err
	}
	defer m.release()
	if in == nil {
		in = abi.SampleInput(m.info.Name)
	}
	// Offline, this is the caller the election controller is online: the
	// decision gets the server's default deadline, and the answer is
	// validated and a failure wrapped the same way.
	limit := DefaultDecisionTimeout(false)
	ctx, cancel := context.WithTimeoutCause(ctx, limit,
		fmt.Errorf("no decision within %v (the server's default --plugin-timeout)", limit))
	defer cancel()
	d, tm, err := m.decide(ctx, in)
	if err == nil {
		err = d.Validate(in)
	}
	if err != nil {
		return nil, tm, fmt.Errorf("%w: %s: %w", abi.ErrStrategyFailed, m.info.Name, err)
	}
	return d, tm, nil
}
