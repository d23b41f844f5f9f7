package abi

import (
	"context"
	"encoding/json"
	"errors"
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

// Configured is implemented by strategies that decide with a settings
// document (plugins/host's modules with a NAME.json): the caller puts it
// in Input.Settings, so that the input it records is the one the strategy
// saw.
type Configured interface {
	// Settings returns the settings document, nil without one.
	Settings() json.RawMessage
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
	// SettingsSHA256 is the sha256 of the settings document the module
	// decides with (its NAME.json), empty when it has none.
	SettingsSHA256 string `json:"settingsSha256,omitempty"`
}

// ErrStrategyFailed wraps every failure of a strategy (trap, timeout,
// garbage output, invalid decision); the election controller then falls
// back to the built-in strategy. The text keeps its historical
// "election:" prefix because it appears in recorded decisions.
var ErrStrategyFailed = errors.New("election: strategy failed")
