package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBarrierWaitsOutAnElection: a backup begun while its member has no
// raft leader (its only peer stopped: no election can end) waits for one
// rather than refuse, and its member's log says so. Once the peer is back
// and the two elect a leader, the backup completes, and it holds the
// write acknowledged before the leader was lost.
func TestBarrierWaitsOutAnElection(t *testing.T) {
	ctx := context.Background()
	ca := newTestCA(t, "ca")
	c1 := memberConfig(t, ca, t.TempDir(), "m1", nil)
	m1, err := Start(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m1.Close() }()
	c2 := memberConfig(t, ca, t.TempDir(), "m2", nil)
	logs := &messages{}
	c2.Logger, c2.EtcdLogger = slog.New(logs), slog.New(slog.DiscardHandler)
	m2 := joinMember(ctx, t, m1, &c2)
	defer m2.Close()
	put, err := m1.client.Put(ctx, "/leasehold/registry/namespaces/acknowledged", "ok")
	if err != nil {
		t.Fatal(err)
	}
	acked := put.Header.Revision

	// m2 alone is no quorum: once its election timeout passes it knows no
	// leader, and none can be elected until m1 is back.
	m1.Close()
	waitFor(t, time.Minute, "m2 to know it has no leader after m1 stopped", func() bool { return !m2.HasLeader() })

	type result struct {
		info SnapshotInfo
		err  error
	}
	done := make(chan result, 1)
	snap := filepath.Join(t.TempDir(), "during-the-election.db")
	// The caller's deadline, not barrierWait, bounds the wait: generous,
	// since a restart and an election on a busy machine take seconds.
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	go func() {
		info, err := m2.SaveSnapshot(bctx, snap)
		done <- result{info, err}
	}()
	const waits = "The backup waits for a raft leader"
	deadline := time.After(time.Minute)
	for !logs.has(waits) {
		select {
		case r := <-done:
			t.Fatalf("SaveSnapshot on a member without a leader returned before the election (%+v, %v); want it to wait for a leader, logging %q", r.info, r.err, waits)
		case <-deadline:
			t.Fatalf("m2's log does not say %q within a minute of a backup begun without a leader; it logged %q", waits, logs.all())
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case r := <-done:
		t.Fatalf("SaveSnapshot returned while m1 was still stopped (%+v, %v); want it to wait", r.info, r.err)
	default:
	}

	// m1 comes back: the two elect a leader, which answers the barrier.
	c1.Join = true
	if m1, err = Start(ctx, c1); err != nil {
		t.Fatalf("restart m1: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("SaveSnapshot begun without a leader, after the election: %v; want it to have waited for the leader", r.err)
	}
	if r.info.Revision < acked {
		t.Errorf("the snapshot's revision %d is below %d, the write acknowledged before the leader was lost", r.info.Revision, acked)
	}
	var keys []string
	if _, err := CheckSnapshot(ctx, snap, "/leasehold", func(key string, _ []byte) error {
		keys = append(keys, key)
		return nil
	}); err != nil {
		t.Fatalf("CheckSnapshot: %v", err)
	}
	if !slices.Contains(keys, "/registry/namespaces/acknowledged") {
		t.Errorf("the snapshot holds %q, not the write acknowledged before the leader was lost", keys)
	}
	if !logs.has("A raft leader answered the backup's barrier read") {
		t.Errorf("m2's log does not say that a leader answered after the wait: %q", logs.all())
	}
}

// waitFor polls cond every 50 ms until it holds, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s", limit, what)
		}
	}
}

// messages is a slog handler that keeps the messages of a member's log
// (with their attributes), safe for the member's goroutines.
type messages struct {
	mu    sync.Mutex
	lines []string
}

func (h *messages) Enabled(context.Context, slog.Level) bool { return true }

func (h *messages) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, b.String())
	return nil
}

func (h *messages) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *messages) WithGroup(string) slog.Handler      { return h }

// has reports whether a message began with prefix.
func (h *messages) has(prefix string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

func (h *messages) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lines)
}
