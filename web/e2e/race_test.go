//go:build race

package e2e

// raceEnabled builds the leasehold binary with -race when the tests run
// with it.
const raceEnabled = true
