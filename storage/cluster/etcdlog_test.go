package cluster

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// recordedLog keeps every record a logger was given, at any level.
type recordedLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *recordedLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordedLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *recordedLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordedLog) WithGroup(string) slog.Handler      { return l }

// TestNewMemberLogsNoError: a new member's etcd sets its storage version
// once its backend holds the raft term (etcdlog.go), and logs no error or
// warning about it on the way; the line etcd logs as an error when its
// first attempt comes before the backend's first commit is at debug.
func TestNewMemberLogsNoError(t *testing.T) {
	rec := &recordedLog{}
	cfg := memberConfig(t, newTestCA(t, "test-ca"), t.TempDir(), "m1", nil)
	cfg.EtcdLogger = slog.New(rec)
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer m.Close()
	// etcd retries every 4 s; the backend commits within a second.
	deadline := time.Now().Add(30 * time.Second)
	for m.etcd.Server.StorageVersion() == nil {
		if time.Now().After(deadline) {
			t.Fatal("etcd set no storage version within 30 s of the member's start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.records {
		if r.Level < slog.LevelWarn {
			continue
		}
		if r.Message == "failed to update storage version" || r.Message == "Failed to detect schema version" {
			t.Errorf("etcd logged %q at %s while its backend had no term yet; want debug", r.Message, r.Level)
		}
		if r.Level >= slog.LevelError {
			t.Errorf("a new member's etcd logged an error: %s", r.Message)
		}
	}
}
