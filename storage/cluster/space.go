package cluster

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// quotaBackendBytes is the embedded member's etcd quota (the size of its
// database file) for --storage-quota-bytes of keys and values: the file
// also holds the history the store keeps for --watch-history and the free
// pages it left, so four times the data's bound (512 MiB by default,
// instead of etcd's 2 GiB for servers). 0 keeps etcd's default.
func quotaBackendBytes(quotaBytes int64) int64 {
	if quotaBytes <= 0 {
		return 0
	}
	return 4 * quotaBytes
}

// recoverSpaceEvery is how often a member checks for its NOSPACE alarm.
const recoverSpaceEvery = 30 * time.Second

// recoverSpace runs recoverSpaceOnce every recoverSpaceEvery until the
// member closes. etcd raises its NOSPACE alarm when a member's database
// file reaches its quota, and then refuses every write but deletes on
// every member until the alarm is disarmed, which etcd leaves to an
// operator (compact, defragment, disarm). A device has none at hand.
func (m *Member) recoverSpace() {
	t := time.NewTicker(recoverSpaceEvery)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := m.recoverSpaceOnce(ctx); err != nil {
			m.log.Warn("Could not recover from etcd's NOSPACE alarm; writes stay refused", "member", m.cfg.Name, "err", err)
		}
		cancel()
	}
}

// recoverSpaceOnce disarms this member's NOSPACE alarm once its database
// fits again: it defragments the file (the store's compactor has dropped
// the history beyond --watch-history, deleted keys are gone) and disarms
// the alarm when the file is under 80% of the quota, so that writes do not
// raise it again at once.
func (m *Member) recoverSpaceOnce(ctx context.Context) error {
	self := uint64(m.etcd.Server.MemberID())
	// The alarms as this member applied them: etcd's AlarmList is a raft
	// proposal, which a leader drops while it hands its leadership over
	// (a move off a slow leader holds it for seconds), and a stale list
	// costs at most one recoverSpaceEvery.
	var mine *pb.AlarmMember
	for _, a := range m.etcd.Server.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE && a.MemberID == self {
			mine = a
		}
	}
	if mine == nil {
		return nil
	}
	quota := m.etcd.Server.Cfg.QuotaBackendBytes
	// The server's own Defragment: v3client's maintenance server has no
	// health notifier, and its Defragment dereferences it (etcd 3.6).
	if err := m.etcd.Server.Defragment(); err != nil {
		return fmt.Errorf("defragment: %w", err)
	}
	st, err := m.local.Status(ctx, "")
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if quota > 0 && st.DbSize >= quota/10*8 {
		return fmt.Errorf("the database holds %d bytes after defragmenting, over 80%% of its quota of %d: delete data (or raise --storage-quota-bytes)", st.DbSize, quota)
	}
	if _, err := m.local.AlarmDisarm(ctx, (*clientv3.AlarmMember)(mine)); err != nil {
		return fmt.Errorf("disarm: %w", err)
	}
	m.log.Warn("etcd's NOSPACE alarm is disarmed: the database fits its quota again after a defragmentation", "member", m.cfg.Name,
		"db_bytes", st.DbSize, "quota_bytes", quota)
	return nil
}
