package abi

import (
	"context"
	"encoding/json"
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

// ModuleStatus describes one loaded (or rejected) strategy module with its
// call statistics, as the web UI's system endpoint reports it.
//
// Deprecated: ModuleStatus is the host's report, not part of the strategy
// contract; the host and the UI use
// github.com/leasehold/leasehold/plugins/status.Module (same fields, same
// JSON) instead. This copy is kept unchanged for ABI 1.1 and will be
// removed in the next ABI minor revision.
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
	// ABIVersion is what the module's lease_strategy_abi_version answered
	// ("" for a file that was never loaded: a refused module is never run,
	// so it has not said).
	ABIVersion string `json:"abiVersion,omitempty"`
	// SignerKeyID is the key id whose signature the host verified before
	// loading the module (server run with trust keys). For a refused file
	// it is the key id its signature file claims, if readable. Empty for
	// built-ins and when the server verifies no signatures.
	SignerKeyID string `json:"signerKeyId,omitempty"`
	// State is "loaded" for a module that serves (or a built-in a file
	// overrides), or "refused: REASON" for a file that never loaded:
	// missing signature, bad signature, untrusted key id, digest mismatch,
	// or the check or self-test error.
	State string `json:"state,omitempty"`
	// RefusedSHA256 is set when a loaded file's current content was
	// refused (LoadError says why): the sha256 of that content, while
	// SHA256 is the previous good version that keeps serving.
	RefusedSHA256 string `json:"refusedSha256,omitempty"`
	// SettingsFile and SettingsSHA256 name the settings document the
	// module serves with (NAME.json beside NAME.wasm), if any.
	SettingsFile   string `json:"settingsFile,omitempty"`
	SettingsSHA256 string `json:"settingsSha256,omitempty"`
	// ABIMinor is the ABI revision the module declared it needs.
	ABIMinor int `json:"abiMinor,omitempty"`
}

// Module states (ModuleStatus.State).
//
// Deprecated: use plugins/status.StateLoaded and
// plugins/status.StateRefusedPrefix; these will be removed with
// ModuleStatus in the next ABI minor revision.
const (
	StateLoaded        = "loaded"
	StateRefusedPrefix = "refused: "
)
