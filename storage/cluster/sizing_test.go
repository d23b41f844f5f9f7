package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage"
)

// TestMemberSizedForDevice: the embedded member runs with leasehold's raft
// log bounds, not etcd's server defaults (15,000 entries in memory).
func TestMemberSizedForDevice(t *testing.T) {
	m, _ := startMember(t, t.TempDir())
	cfg := m.etcd.Server.Cfg
	if cfg.SnapshotCount != memberSnapshotCount || cfg.SnapshotCatchUpEntries != memberSnapshotCatchUpEntries {
		t.Errorf("the member runs with SnapshotCount %d and SnapshotCatchUpEntries %d, want %d and %d",
			cfg.SnapshotCount, cfg.SnapshotCatchUpEntries, memberSnapshotCount, memberSnapshotCatchUpEntries)
	}
	if cfg.BackendBatchLimit != memberBackendBatchLimit || cfg.BackendBatchInterval != time.Second {
		t.Errorf("the member's backend commits every %d writes or %s, want %d or 1s (reads copy the uncommitted writes)",
			cfg.BackendBatchLimit, cfg.BackendBatchInterval, memberBackendBatchLimit)
	}
}

// TestNoSpaceRecovered: --storage-quota-bytes sizes the member's etcd
// quota; once the database reaches it etcd refuses writes (its NOSPACE
// alarm, on every member), and once the data is deleted and compacted
// the member defragments and disarms the alarm itself, and writes pass
// again.
func TestNoSpaceRecovered(t *testing.T) {
	cfg := memberConfig(t, newTestCA(t, "test-ca"), t.TempDir(), "m1", nil)
	cfg.QuotaBytes = 1 << 20 // a 4 MiB database
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer m.Close()
	if got := m.etcd.Server.Cfg.QuotaBackendBytes; got != 4<<20 {
		t.Fatalf("QuotaBackendBytes = %d, want 4 MiB (four times --storage-quota-bytes)", got)
	}
	s := openInProcess(t, m, "/space")
	ctx := context.Background()
	value := make([]byte, 512<<10)
	n := 0
	for ; ; n++ {
		_, err := s.Create(ctx, fmt.Sprintf("/v-%d", n), value)
		if errors.Is(err, storage.ErrQuotaExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("write %d: %v", n, err)
		}
		// The member commits its backend once a second
		// (BackendBatchInterval), and the quota reads the committed
		// size: on an idle machine all the writes fit in one batch.
		m.etcd.Server.Backend().ForceCommit()
		if n > 64 {
			t.Fatalf("%d writes of 512 KiB passed a 4 MiB quota", n)
		}
	}
	for i := range n {
		if _, _, err := s.Delete(ctx, fmt.Sprintf("/v-%d", i), 0); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	rev, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if _, err := s.Create(ctx, "/after", []byte("x")); !errors.Is(err, storage.ErrQuotaExceeded) {
		t.Fatalf("a write before the alarm is disarmed = %v, want still refused (etcd's alarm holds until disarmed)", err)
	}
	if err := m.recoverSpaceOnce(ctx); err != nil {
		t.Fatalf("recoverSpaceOnce after the data was deleted and compacted: %v", err)
	}
	if _, err := s.Create(ctx, "/after", []byte("x")); err != nil {
		t.Errorf("a write after the recovery: %v", err)
	}
}
