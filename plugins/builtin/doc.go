// Package builtin embeds the strategies that ship inside the leasehold
// binary, as WebAssembly modules built from the C sources next to them
// (see README.md). They run through plugins/host like any operator module,
// so the built-in path exercises the same sandbox; the native
// engine/election.Oldest is the oracle their tests compare against.
package builtin
