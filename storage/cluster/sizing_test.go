package cluster

import "testing"

// TestMemberSizedForDevice: the embedded member runs with leasehold's raft
// log bounds, not etcd's server defaults (15,000 entries in memory).
func TestMemberSizedForDevice(t *testing.T) {
	m, _ := startMember(t, t.TempDir())
	cfg := m.etcd.Server.Cfg
	if cfg.SnapshotCount != memberSnapshotCount || cfg.SnapshotCatchUpEntries != memberSnapshotCatchUpEntries {
		t.Errorf("the member runs with SnapshotCount %d and SnapshotCatchUpEntries %d, want %d and %d",
			cfg.SnapshotCount, cfg.SnapshotCatchUpEntries, memberSnapshotCount, memberSnapshotCatchUpEntries)
	}
}
