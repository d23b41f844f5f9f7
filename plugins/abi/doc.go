// Package abi is the contract between leasehold and election strategy
// modules: the WebAssembly export and import names, the ABI version, and the
// JSON documents exchanged (Input in, Decision out). It depends on nothing
// but the standard library so that it builds for the host and for
// GOOS=wasip1 guests alike; the host (plugins/host), the Go guest SDK
// (plugins/sdk) and the election controller (engine/election) all use it,
// so they cannot drift apart. It is a module of its own
// (github.com/leasehold/leasehold/plugins/abi) so that the guest SDK, also
// a module, can be used with plain `go get`. docs/plugins.md describes it for authors in
// other languages.
package abi
