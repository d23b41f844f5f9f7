package abi

import (
	"context"
	"errors"
	"time"
)

// Strategy decides who should lead: the election controller
// (engine/election) calls it, the WebAssembly host (plugins/host) and the
// controller's native OldestEmulationVersion implement it.
// Implementations must be safe for concurrent use and must honour ctx:
// its deadline is the decision's whole time budget, set by the caller.
type Strategy interface {
	// Name is the strategy name candidates declare (e.g.
	// "OldestEmulationVersion", "example.com/newest-binary-version").
	Name() string
	// Module identifies the implementation for audit records.
	Module() ModuleInfo
	// Decide ranks the candidates in in. It returns the strategy's answer
	// as decoded, or why there is none; the caller validates the answer
	// against in and wraps every failure in ErrStrategyFailed.
	Decide(ctx context.Context, in *Input) (*Decision, error)
}

// Registry resolves strategy names to strategies. plugins/host implements
// it over a directory of WASM modules plus the embedded built-ins.
type Registry interface {
	// Lookup returns the current strategy for name, or false if none is
	// loaded. The result may change between calls (hot reload).
	Lookup(name string) (Strategy, bool)
}

// ModuleInfo identifies the code that made a decision, for audit.
type ModuleInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	// Builtin is true for strategies shipped inside the binary.
	Builtin bool `json:"builtin"`
}

// ErrStrategyFailed wraps every failure of a strategy (trap, timeout,
// garbage output, invalid decision); the election controller then falls
// back to the built-in strategy. The text keeps its historical
// "election:" prefix because it appears in recorded decisions.
var ErrStrategyFailed = errors.New("election: strategy failed")

// ModuleStatus describes one loaded (or rejected) strategy module with its
// call statistics: plugins/host reports it, the web UI and /metrics show
// it.
type ModuleStatus struct {
	Name        string `json:"name"`
	File        string `json:"file"`
	SHA256      string `json:"sha256"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	Builtin     bool   `json:"builtin"`
	// Active is true when Lookup(Name) returns this module (false for a
	// built-in overridden by a file, or a file that never loaded).
	Active      bool          `json:"active"`
	LoadedAt    time.Time     `json:"loadedAt"`
	Calls       uint64        `json:"calls"`
	Errors      uint64        `json:"errors"`
	LastError   string        `json:"lastError,omitempty"`
	LastErrorAt time.Time     `json:"lastErrorAt,omitzero"`
	LatencyP50  time.Duration `json:"latencyP50"`
	LatencyP99  time.Duration `json:"latencyP99"`
	LatencySum  time.Duration `json:"latencySum"`
	// LoadError is why the file's current content is not serving (the
	// previous good version, if any, still is).
	LoadError string `json:"loadError,omitempty"`
}
