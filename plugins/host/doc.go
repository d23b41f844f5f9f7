// Package host runs election strategies compiled to WebAssembly with
// wazero and implements abi.Registry over them: the embedded
// built-ins (plugins/builtin) plus a directory of .wasm files that is
// polled for new, changed and removed modules while the server runs.
//
// Safety comes first (docs/plugins.md, research wasm-plugins.md C.5): the
// compiler runtime with WithCloseOnContextDone and a per-decision deadline
// (without it a spinning guest freezes the whole process at the next GC),
// a memory page limit, a fresh instance per decision (an instance is never
// shared between goroutines and never reused after an error), no
// filesystem, environment, arguments, network, wall clock or randomness
// beyond what the Input carries, and only the lease_strategy imports plus a
// fixed subset of WASI. A module is checked (imports, exports and their
// signatures, ABI version, self-description) and self-tested on golden
// inputs before it serves; every later failure is wrapped in
// abi.ErrStrategyFailed, counted, and logged once per incident.
package host
