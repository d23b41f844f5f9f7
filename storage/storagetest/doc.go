// Package storagetest is the conformance suite every storage.Interface
// backend must pass unchanged: call Run from the backend's tests.
//
// newStore must return an open store and arrange its Close with t.Cleanup
// (Close must tolerate a second call, since one test closes explicitly).
// Tests use their own key prefixes and compare revisions relatively, so a
// shared, non-empty backend (etcd) works too. The slow-watcher test needs
// the backend to end a watcher that has not read anything after at most
// SlowWatcherWrites commits; configure its watch buffer accordingly.
package storagetest
