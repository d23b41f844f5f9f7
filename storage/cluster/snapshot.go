package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/etcd"
)

// A snapshot is what etcd's maintenance Snapshot streams: the member's
// bbolt database followed by the sha256 of everything before it. etcd pads
// the database so that a file with the digest is 32 bytes past a multiple
// of 512; a leasehold bbolt file (whole pages) never is.
const snapshotSectorSize = 512

// ErrNotSnapshot reports a file that is not an etcd snapshot (it may be a
// single-device bbolt backup).
var ErrNotSnapshot = errors.New("not an etcd snapshot")

// Snapshot streams a snapshot of the member's database to w, taken by the
// member itself (not by whichever member a client balances to), and
// returns the bytes written. The stream ends with the digest that
// CheckSnapshot verifies; a cut stream therefore never passes as whole.
func (m *Member) Snapshot(ctx context.Context, w io.Writer) (int64, error) {
	rc, err := m.client.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("cluster: snapshot of member %s: %w", m.cfg.Name, err)
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		return n, fmt.Errorf("cluster: snapshot of member %s: %w", m.cfg.Name, err)
	}
	return n, nil
}

// barrierWait bounds the barrier when the caller's context has no
// deadline. With a leader the read takes milliseconds. Without one the
// barrier waits: a raft election (0.7-1.4 s on an idle LAN, several
// seconds on a device whose CPUs are busy, and right after a partition
// heals) ends with a leader that answers the read; a member cut off from
// its quorum never gets one, and is refused at the bound.
const barrierWait = 10 * time.Second

// barrierRetryPause spaces the barrier's reads while the member has no
// leader (etcd's client has already retried "no leader" for a while
// before it returns it).
const barrierRetryPause = 100 * time.Millisecond

// barrierPatience is how long the barrier read may go unanswered before
// the member's log says that the backup waits for a leader (with one, the
// read takes milliseconds).
const barrierPatience = time.Second

// barrierKey is the key the barrier reads: any key does, the answer that
// counts is the header's revision.
const barrierKey = "/leasehold-backup-barrier"

// Barrier is the read every backup of this member starts with: a
// linearizable read, which etcd answers only through a raft leader with
// a quorum (the leader confirms it still leads, and this member waits
// until it applied everything committed before the read). The revision
// it returns is therefore at least that of every write the cluster had
// acknowledged when Barrier began, and a snapshot this member takes
// afterwards holds them all (CheckBarrier verifies it). While the member
// has no leader (an election under way) it waits for one, says so in its
// log, and reads again, until ctx's deadline (barrierWait without one):
// no read is answered without a leader, so waiting keeps the promise. A
// member cut off from its quorum fails with ErrNoQuorum at that bound: its
// snapshot could miss acknowledged writes.
func (m *Member) Barrier(ctx context.Context) (int64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, barrierWait)
		defer cancel()
	}
	began := time.Now()
	var waiting atomic.Bool
	waits := func(why string) {
		if waiting.CompareAndSwap(false, true) {
			deadline, _ := ctx.Deadline()
			m.log.Info("The backup waits for a raft leader before its barrier read", "member", m.cfg.Name,
				"why", why, "up_to", time.Until(deadline).Round(time.Millisecond))
		}
	}
	// A member that still believes in a lost leader, or one whose leader
	// is elected but not yet heard, says so too.
	slow := time.AfterFunc(barrierPatience, func() { waits("no answer yet: an election may be under way") })
	defer slow.Stop()
	for {
		// The member's own client URL: the read is served, and the
		// snapshot taken, by this member. WithRequireLeader fails while
		// the member knows it has no leader (after the client's own
		// retries); a member that still believes in a lost one waits in
		// the read until the leader answers or ctx ends.
		resp, err := m.client.Get(clientv3.WithRequireLeader(ctx), barrierKey, clientv3.WithCountOnly())
		if err == nil {
			if waiting.Load() {
				m.log.Info("A raft leader answered the backup's barrier read", "member", m.cfg.Name,
					"waited", time.Since(began).Round(time.Millisecond), "revision", resp.Header.Revision)
			}
			return resp.Header.Revision, nil
		}
		if ctx.Err() != nil || !electionUnderWay(err) {
			return 0, barrierError(m.cfg.Name, err, waiting.Load(), time.Since(began))
		}
		waits(err.Error())
		select {
		case <-ctx.Done():
			return 0, barrierError(m.cfg.Name, err, true, time.Since(began))
		case <-time.After(barrierRetryPause):
		}
	}
}

// barrierError is the refusal of a backup whose barrier read failed.
func barrierError(member string, err error, waited bool, took time.Duration) error {
	after := fmt.Sprintf("after %v", took.Round(time.Millisecond))
	if waited {
		after = fmt.Sprintf("after waiting %v for a raft leader", took.Round(time.Millisecond))
	}
	return fmt.Errorf("cluster: member %s cannot confirm that it holds every acknowledged write "+
		"(a linearizable read through the raft leader failed %s: %v): %w; a backup of it could miss writes "+
		"the cluster acknowledged. Back up a member that has a quorum (leasehold cluster status shows them)",
		member, after, err, ErrNoQuorum)
}

// CheckBarrier refuses a snapshot whose revision is below the revision of
// the barrier read before it: it would miss acknowledged writes.
func CheckBarrier(info SnapshotInfo, barrier int64) error {
	if info.Revision < barrier {
		return fmt.Errorf("cluster: the snapshot's revision %d is below %d, the revision a linearizable read "+
			"returned before it was taken: it misses acknowledged writes; take the backup again", info.Revision, barrier)
	}
	return nil
}

// SaveSnapshot writes a snapshot of the member to path (a new file,
// fsynced, then renamed into place) and checks it: after Barrier, so that
// it holds every write the cluster acknowledged before the call.
func (m *Member) SaveSnapshot(ctx context.Context, path string) (SnapshotInfo, error) {
	barrier, err := m.Barrier(ctx)
	if err != nil {
		return SnapshotInfo{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".snapshot-*")
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("cluster: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = m.Snapshot(ctx, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return SnapshotInfo{}, err
	}
	info, err := CheckSnapshot(ctx, tmp.Name(), "", nil)
	if err == nil {
		err = CheckBarrier(info, barrier)
	}
	if err != nil {
		return info, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return info, fmt.Errorf("cluster: %w", err)
	}
	return info, syncDir(filepath.Dir(path))
}

// SnapshotInfo describes a checked snapshot.
type SnapshotInfo struct {
	Size     int64 // bytes, digest included
	Revision int64 // the store's revision when it was taken
	Keys     int   // live keys, all prefixes
	Prefixed int   // live keys under the prefix CheckSnapshot was given
}

// IsSnapshot reports whether the file at path ends with a valid etcd
// snapshot digest. It reads the whole file.
func IsSnapshot(path string) (bool, error) {
	err := verifyDigest(path)
	if errors.Is(err, ErrNotSnapshot) {
		return false, nil
	}
	return err == nil, err
}

func verifyDigest(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	size := st.Size()
	if size < snapshotSectorSize || size%snapshotSectorSize != sha256.Size {
		return fmt.Errorf("cluster: %s: %w (no digest at its end)", path, ErrNotSnapshot)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, size-sha256.Size)); err != nil {
		return fmt.Errorf("cluster: %s: %w", path, err)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return fmt.Errorf("cluster: %s: %w", path, err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("cluster: %s: %w (its digest does not match its content: damaged or cut short)", path, ErrNotSnapshot)
	}
	return nil
}

// CheckSnapshot verifies the snapshot at path: its digest, bbolt's
// page-level consistency check, and that every stored revision parses.
// With check, it calls check for the newest value of every live key under
// prefix (the key without the prefix, as storage/etcd hands it to the
// engine) and fails at the first error check returns.
func CheckSnapshot(ctx context.Context, path, prefix string, check func(key string, value []byte) error) (SnapshotInfo, error) {
	var info SnapshotInfo
	if err := verifyDigest(path); err != nil {
		return info, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return info, fmt.Errorf("cluster: %w", err)
	}
	info.Size = st.Size()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return info, fmt.Errorf("cluster: open snapshot %s: %w", path, err)
	}
	defer db.Close()
	live := map[string][]byte{}
	err = db.View(func(tx *bolt.Tx) error {
		var problems []string
		for err := range tx.Check() {
			problems = append(problems, err.Error())
		}
		if len(problems) > 0 {
			return fmt.Errorf("bbolt consistency check: %s", strings.Join(problems, "; "))
		}
		b := tx.Bucket(schema.Key.Name())
		if b == nil {
			return fmt.Errorf("no %q bucket", schema.Key.Name())
		}
		// Revisions in order: the last value seen of a key is its newest,
		// and a tombstone ends it.
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rev, err := parseRevision(k)
			if err != nil {
				return err
			}
			info.Revision = max(info.Revision, rev.Main)
			if len(v) == 0 {
				return nil // a revision bump after a restore holds no value
			}
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return fmt.Errorf("revision %d: %w", rev.Main, err)
			}
			if mvcc.IsTombstone(k) {
				delete(live, string(kv.Key))
			} else {
				live[string(kv.Key)] = kv.Value
			}
			return nil
		})
	})
	if err != nil {
		return info, fmt.Errorf("cluster: snapshot %s: %w", path, err)
	}
	info.Keys = len(live)
	for k, v := range live {
		key, ok := strings.CutPrefix(k, prefix)
		if !ok || prefix == "" || strings.HasPrefix(key, etcd.ReservedDir) {
			continue
		}
		info.Prefixed++
		if check != nil {
			if err := check(key, v); err != nil {
				return info, fmt.Errorf("cluster: snapshot %s: record %s: %w", path, key, err)
			}
		}
	}
	return info, nil
}

// parseRevision reads a revision key, which mvcc.BytesToRev would panic on
// when it is malformed.
func parseRevision(k []byte) (rev mvcc.Revision, err error) {
	if len(k) != 17 && len(k) != 18 { // main, '_', sub (and a tombstone mark)
		return rev, fmt.Errorf("malformed revision key %x", k)
	}
	return mvcc.BytesToRev(k), nil
}

// RestoreRevisionBump is how far a restored cluster's revision jumps past
// the snapshot's, as Kubernetes' etcd restore procedure advises
// (etcdutl snapshot restore --bump-revision 1000000000 --mark-compacted):
// beyond any revision the old cluster may have reached after the snapshot,
// so that no client's resourceVersion lies in the restored cluster's
// future. Every older revision is marked compacted, so that clients'
// watches end with 410 Gone and they relist.
const RestoreRevisionBump = 1_000_000_000

// Restore writes cfg's member's etcd data directory from the snapshot at
// path, as a new single-member cluster of its own (a new cluster ID, so
// no member of the snapshot's cluster is part of it), with the revision
// bumped by bump and everything before marked compacted. The data
// directory must hold no member; it appears whole or not at all (written
// beside it, then renamed).
func Restore(ctx context.Context, path string, cfg Config, bump int64) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, err := os.Stat(filepath.Join(cfg.Paths.EtcdDir, "member")); err == nil {
		return fmt.Errorf("cluster: restore: %s already holds an etcd member", cfg.Paths.EtcdDir)
	}
	if err := verifyDigest(path); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	// A random bootstrap token gives the restored cluster an ID of its
	// own, even on the peer URL of a member of the old cluster.
	token := make([]byte, 8)
	if _, err := rand.Read(token); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	tmp := cfg.Paths.EtcdDir + ".restore"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	if err := os.RemoveAll(cfg.Paths.EtcdDir); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	// The etcd server's logger names its component (serve: etcd); the
	// member's logger already names another, and a line carries one.
	elog := cfg.EtcdLogger
	if elog == nil {
		elog = cfg.Logger
	}
	lg := etcd.NewZapLogger(elog, etcd.ZapLog{Label: "etcd restore"})
	err := etcdutl.NewV3(lg).Restore(etcdutl.RestoreConfig{
		SnapshotPath:        path,
		Name:                cfg.Name,
		OutputDataDir:       tmp,
		PeerURLs:            []string{cfg.AdvertisePeer},
		InitialCluster:      cfg.Name + "=" + cfg.AdvertisePeer,
		InitialClusterToken: initialClusterToken + "-restored-" + hex.EncodeToString(token),
		RevisionBump:        uint64(bump),
		MarkCompacted:       bump > 0,
	})
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("cluster: restore %s: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	if err := os.Rename(tmp, cfg.Paths.EtcdDir); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	return syncDir(filepath.Dir(cfg.Paths.EtcdDir))
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	if err := datadir.SyncDir(dir); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}
