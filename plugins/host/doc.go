// Package host runs election strategies compiled to WebAssembly with
// wazero and implements abi.Registry over them: the embedded built-ins
// (plugins/builtin) plus a directory of .wasm files that is polled for new,
// changed and removed modules while the server runs. It knows nothing of
// the election controller; both meet in plugins/abi.
//
// The host owns the sandbox (docs/plugins.md): the compiler runtime with
// WithCloseOnContextDone, so that every guest call ends at its context's
// deadline (without it a spinning guest freezes the whole process at the
// next GC), a CallLimit for calls whose caller set no deadline, a memory
// page limit, a fresh instance per call (an instance is never shared
// between goroutines and never reused after an error), no filesystem,
// environment, arguments, network, wall clock or randomness beyond what
// the Input carries, and only the lease_strategy imports plus a fixed
// subset of WASI. It also owns decoding what a guest writes: one strict
// JSON document. A module is checked (imports, exports and their
// signatures, ABI version, self-description) and self-tested on golden
// inputs before it serves.
//
// A live decision's deadline, the validation of its answer against the
// candidates, wrapping failures in abi.ErrStrategyFailed, logging them and
// backing off belong to the caller, the election controller
// (engine/election); the host only counts calls, errors and latency per
// module for Modules.
package host
