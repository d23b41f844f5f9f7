// Package testneeds is how a test says what it needs beyond Go: a program
// (Chromium, kubectl, clang, wabt, a Rust compiler with the wasm32 target),
// root, or minutes of machine time.
//
// Two tiers share one rule. `go test -short ./...` (make test-short) is the
// fast tier that passes on a machine with Go alone: a test whose need is
// missing is skipped, and the skip says what it needs. Without -short
// (make test) a missing need fails the test with the command that installs
// it: the full suite never passes by leaving tests out.
//
// Test code only: no non-test package imports it.
package testneeds
