// Package status describes the strategy modules a host has loaded (or
// refused) with their call statistics, as the web UI, /metrics and
// `leasehold plugin list` show them. It is the host's report, not part of
// the strategy contract: plugins/abi, which strategy authors `go get`,
// carries only what a module and the host exchange. Standard library only,
// so that the web server can show it without linking the WASM runtime.
package status
