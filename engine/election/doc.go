// Package election is leasehold's coordinated leader election (KEP-4355):
// a controller that watches LeaseCandidates and Leases, pings candidates,
// and grants or hands over leases to the candidate a strategy ranks best.
//
// A Strategy is a pure function from a deterministic snapshot (Input) to a
// ranking (Decision). Strategies are usually WebAssembly modules run by
// plugins/host; this package defines the contract and keeps every safety
// rule on the host side: a live lease is never handed to another identity
// (only preferredHolder is set), grants go only to candidates that acked
// this round's ping, unknown names in a ranking are ignored, and a failing
// strategy falls back to the built-in one without preempting anybody.
package election
