module github.com/leasehold/leasehold/plugins/abi

// The strategy contract is its own module, so that a strategy written
// outside this repository needs only `go get` (the Go SDK requires it).
// Standard library only; go 1.24 is the first release with go:wasmexport.
go 1.24
