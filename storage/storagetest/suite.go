package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage"
)

// SlowWatcherWrites is how many sequential commits the slow-watcher test
// makes while its watcher reads nothing.
const SlowWatcherWrites = 600

// timeout bounds every wait in the suite, and each test's context (its
// writes included); a conforming backend answers in milliseconds, so
// hitting it means a hang. Every wait ends as soon as it succeeds: the
// bound is generous because 600 fsynced etcd writes took over 10 s on
// a 2-core machine at load 30.
const timeout = 60 * time.Second

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) storage.Interface) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.Interface)
	}{
		{"Revisions", testRevisions},
		{"CreateGet", testCreateGet},
		{"UpdateCAS", testUpdateCAS},
		{"Delete", testDelete},
		{"ListPaging", testListPaging},
		{"ListPrefixIsolation", testListPrefixIsolation},
		{"ListAtRevision", testListAtRevision},
		{"CompactedAndFuture", testCompactedAndFuture},
		{"WatchReplayThenLive", testWatchReplayThenLive},
		{"WatchPrefixFilter", testWatchPrefixFilter},
		{"WatchDeleteEvents", testWatchDeleteEvents},
		{"WatchFromNow", testWatchFromNow},
		{"WatchProgress", testWatchProgress},
		{"WatchStopAndCancel", testWatchStopAndCancel},
		{"ConcurrentCAS", testConcurrentCAS},
		{"SlowWatcher", testSlowWatcher},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// prefixFor gives each test its own key space.
func prefixFor(t *testing.T) string {
	return "/storagetest/" + strings.ReplaceAll(t.Name(), "/", "_") + "/"
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, s storage.Interface, key, value string) storage.KeyValue {
	t.Helper()
	kv, err := s.Create(ctxFor(t), key, []byte(value))
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	return kv
}

func mustUpdate(t *testing.T, s storage.Interface, key, value string, rev int64) storage.KeyValue {
	t.Helper()
	kv, err := s.Update(ctxFor(t), key, []byte(value), rev)
	if err != nil {
		t.Fatalf("Update(%q, %d): %v", key, rev, err)
	}
	return kv
}

func mustRev(t *testing.T, s storage.Interface) int64 {
	t.Helper()
	rev, err := s.CurrentRevision(ctxFor(t))
	if err != nil {
		t.Fatalf("CurrentRevision: %v", err)
	}
	return rev
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

func checkKV(t *testing.T, what string, got storage.KeyValue, key, value string, create, mod int64) {
	t.Helper()
	if got.Key != key || string(got.Value) != value || got.CreateRevision != create || got.ModRevision != mod {
		t.Fatalf("%s: got {%q %q create=%d mod=%d}, want {%q %q create=%d mod=%d}",
			what, got.Key, got.Value, got.CreateRevision, got.ModRevision, key, value, create, mod)
	}
}

// describe renders KVs compactly for comparisons.
func describe(kvs []storage.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s=%s@%d/%d ", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision)
	}
	return b.String()
}

// recv waits for the next response; the channel must not close first.
func recv(t *testing.T, w storage.Watcher) storage.WatchResponse {
	t.Helper()
	select {
	case resp, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch channel closed unexpectedly")
		}
		return resp
	case <-time.After(timeout):
		t.Fatal("timed out waiting for a watch response")
	}
	panic("unreachable")
}

// recvEvents collects n events, failing on errors or progress-less gaps.
func recvEvents(t *testing.T, w storage.Watcher, n int) []storage.Event {
	t.Helper()
	var evs []storage.Event
	for len(evs) < n {
		resp := recv(t, w)
		if resp.Err != nil {
			t.Fatalf("watch ended after %d of %d events: %v", len(evs), n, resp.Err)
		}
		for _, e := range resp.Events {
			if resp.Revision < e.Revision() {
				t.Fatalf("response revision %d below its event revision %d", resp.Revision, e.Revision())
			}
		}
		evs = append(evs, resp.Events...)
	}
	if len(evs) > n {
		t.Fatalf("got %d events, want %d", len(evs), n)
	}
	return evs
}

// expectQuiet checks that no response arrives for a short while.
func expectQuiet(t *testing.T, w storage.Watcher) {
	t.Helper()
	select {
	case resp, ok := <-w.ResultChan():
		t.Fatalf("unexpected watch response (open=%v): %+v", ok, resp)
	case <-time.After(50 * time.Millisecond):
	}
}

// expectClosed waits for the channel to close, tolerating queued responses.
func expectClosed(t *testing.T, w storage.Watcher) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel not closed")
		}
	}
}
