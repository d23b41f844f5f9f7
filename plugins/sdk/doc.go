// Package sdk is the Go guest SDK for leasehold election strategies. A
// strategy is a GOOS=wasip1 reactor that registers itself from init:
//
//	func init() {
//		sdk.Register(abi.Info{Name: "example.com/mine", Version: "1.0.0"}, decide)
//	}
//	func main() {}
//
// built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o mine.wasm .
//
// The package provides the ABI exports (lease_strategy_abi_version,
// lease_strategy_info, lease_strategy_decide) and wraps the host imports;
// it imports only plugins/abi and the standard library. On other
// platforms Register only records the strategy, so a strategy package
// still builds and its decide function can be unit-tested natively with
// Decide.
//
// The SDK is a module of its own (github.com/leasehold/leasehold/plugins/sdk,
// requiring the abi module), so a strategy outside this repository only
// needs `go get github.com/leasehold/leasehold/plugins/sdk@v0.x` once it is
// tagged plugins/sdk/v0.x (tag plugins/abi/v0.x at the same commit).
// Candidates name a strategy by the Info.Name given to Register, never by
// the module's file name.
//
// Go guests work but are heavy: a ~3 MB module, ~1 s to compile (cached
// on disk afterwards), ~5 ms to instantiate and ~9 ms per decision over
// 100 candidates. For anything hot, write the strategy in C with
// plugins/sdk/c/lease_strategy.h instead (see docs/plugins.md).
package sdk
