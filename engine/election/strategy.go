package election

import (
	"context"
	"errors"

	"github.com/leasehold/leasehold/plugins/abi"
)

// OldestEmulationVersion is the built-in strategy name, as upstream.
const OldestEmulationVersion = "OldestEmulationVersion"

// ModuleInfo identifies the code that made a decision, for audit.
type ModuleInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	// Builtin is true for strategies shipped inside the binary.
	Builtin bool `json:"builtin"`
}

// Strategy decides who should lead. Implementations must be safe for
// concurrent use and must honour ctx's deadline.
type Strategy interface {
	// Name is the strategy name candidates declare (e.g.
	// "OldestEmulationVersion", "example.com/newest-binary-version").
	Name() string
	// Module identifies the implementation for audit records.
	Module() ModuleInfo
	// Decide ranks the candidates in in.
	Decide(ctx context.Context, in *abi.Input) (*abi.Decision, error)
}

// Registry resolves strategy names to strategies. plugins/host implements
// it over a directory of WASM modules plus the embedded built-ins.
type Registry interface {
	// Lookup returns the current strategy for name, or false if none is
	// loaded. The result may change between calls (hot reload).
	Lookup(name string) (Strategy, bool)
}

// ErrStrategyFailed wraps every failure of a strategy (trap, timeout,
// garbage output); the controller then falls back to the built-in strategy.
var ErrStrategyFailed = errors.New("election: strategy failed")
