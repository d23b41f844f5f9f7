// Package e2e holds leasehold's end-to-end tests. It has no non-test code:
// the tests build the real leasehold binary once per test process (go build
// of github.com/leasehold/leasehold, with -race when the tests run with it),
// start it as child processes ("leasehold serve --listen 127.0.0.1:0
// --data-dir <tmp> --ready-file <tmp>/ready", learning the chosen address
// from the ready file), and drive it over HTTP with real clients: client-go
// (typed, dynamic, leader election), kubectl, plain net/http and leasehold's
// own commands (run, leader, kubeconfig, healthcheck, backup, restore,
// compact, plugin).
//
// Servers run in their own processes so that they can be stopped with
// signals, crashed with SIGKILL, frozen with SIGSTOP, or run as replicas on
// a shared etcd cluster. The package also holds the layering and
// dependency checks of the whole module (layering_test.go), which run go
// list from the module root.
//
// Helpers live in _test.go files only, so the package itself respects web's
// layering: it imports nothing of storage, bbolt or wazero.
package e2e
