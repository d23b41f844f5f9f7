module github.com/leasehold/leasehold/plugins/sdk

// The Go guest SDK is its own module, so that a strategy written outside
// this repository needs only `go get` (no replace pointing at a checkout).
// go 1.24 is the first release with go:wasmexport.
go 1.24

require github.com/leasehold/leasehold/plugins/abi v0.1.0

// Inside this repository the SDK builds against the abi beside it; a
// replace in a dependency is ignored by its users, who get the tagged abi.
replace github.com/leasehold/leasehold/plugins/abi => ../abi
