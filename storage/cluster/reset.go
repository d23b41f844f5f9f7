package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/etcd"
)

// ResetResult is what Reset staged.
type ResetResult struct {
	Staged
	// State is the member's name and addresses in the lost cluster, for
	// the --cluster-init that starts the new one.
	State State
}

// Reset turns the stopped member in dir, whose cluster lost its quorum for
// good, into the data of a new one-member cluster ("leasehold cluster
// reset", as etcd's --force-new-cluster and k3s' --cluster-reset): the
// next "serve --cluster-init" in dir starts it with every write the member
// holds, its log's included.
//
// A copy of the member's etcd data starts, alone and on loopback ports
// nobody else knows, with etcd's --force-new-cluster, after its log's
// commit index is raised to its last entry (commitLogTail): etcd commits
// every entry of the log and drops the other members. A barrier read
// (Member.Barrier) waits until all of it is applied, and the snapshot
// taken then holds it all. That snapshot is staged as "leasehold restore"
// stages one, the member's old files moved aside (never deleted): the
// new cluster gets a new CA, a new cluster ID and the token its
// --cluster-init is given. So the lost members are fenced: their
// certificates, and those of every replica, are of the old CA, which the
// new cluster refuses at the TLS handshake, and their data names another
// cluster ID. They come back only by joining again with emptied data
// directories.
func Reset(ctx context.Context, dir datadir.Layout, log *slog.Logger) (ResetResult, error) {
	var out ResetResult
	p := dir.Member()
	st, err := LoadState(p)
	if err != nil {
		return out, fmt.Errorf("no cluster member to reset in %s: %w", dir.Dir, err)
	}
	out.State = st
	if InUse(p) {
		return out, fmt.Errorf("the cluster member in %s is running: stop it first (kill it if it hangs without a quorum)", p.Dir)
	}
	if _, err := os.Stat(p.RestoreSnapshot); err == nil {
		return out, fmt.Errorf("%s already holds a staged snapshot: start it with serve --cluster-init", p.Dir)
	}
	// A member that answers means the cluster, or a part of it, lives:
	// a reset would split it in two.
	if alive, err := othersAnswering(ctx, p, st.Name, log); err != nil {
		return out, fmt.Errorf("cluster: reset: %w", err)
	} else if len(alive) > 0 {
		return out, fmt.Errorf("other members of the cluster answer (%s): a reset now would make a second cluster beside them. "+
			"If they have a quorum, remove the dead members instead (leasehold cluster remove NAME); "+
			"if not, stop leasehold on every other device first, reset one member, and let the others join it with emptied data directories",
			strings.Join(alive, ", "))
	}
	work := p.Dir + ".reset"
	if err := os.RemoveAll(work); err != nil {
		return out, fmt.Errorf("cluster: reset: %w", err)
	}
	defer os.RemoveAll(work)
	tmp := Config{State: st, Paths: p, Logger: log}
	tmp.Paths.EtcdDir = filepath.Join(work, "etcd")
	if err := copyTree(p.EtcdDir, tmp.Paths.EtcdDir); err != nil {
		return out, fmt.Errorf("cluster: reset: copy the member's data: %w", err)
	}
	// Loopback ports of its own: no member of the lost cluster reaches
	// the forced copy, and a device's usual ports stay free.
	ports, err := loopbackPorts(2)
	if err != nil {
		return out, fmt.Errorf("cluster: reset: %w", err)
	}
	tmp.ListenPeer, tmp.ListenClient = "127.0.0.1:"+ports[0], "127.0.0.1:"+ports[1]
	tmp.AdvertisePeer, tmp.AdvertiseClient = "https://"+tmp.ListenPeer, "https://"+tmp.ListenClient
	raised, err := commitLogTail(tmp.Paths.EtcdDir, log)
	if err != nil {
		return out, fmt.Errorf("cluster: reset: %w", err)
	}
	if raised > 0 {
		log.Info("Committing the tail of the member's raft log that its last commit index did not cover yet", "entries", raised)
	}
	tmp.ForceNewCluster = true
	m, err := Start(ctx, tmp)
	if err != nil {
		return out, fmt.Errorf("cluster: reset: start the member's data as a one-member cluster: %w", err)
	}
	snap := filepath.Join(work, "reset.snapshot")
	info, err := m.SaveSnapshot(ctx, snap)
	m.Close()
	if err != nil {
		return out, fmt.Errorf("cluster: reset: %w", err)
	}
	staged, err := stage(info, dir, func(dst string) error { return os.Rename(snap, dst) })
	out.Staged = staged
	return out, err
}

// commitLogTail raises the commit index recorded in the raft log (WAL)
// under etcdDir to its last entry, and reports by how many entries.
// etcd's --force-new-cluster keeps only the entries the member knew to be
// committed and drops the rest. But a member learns of a commit from the
// leader's next message, and etcd writes a commit index that changed alone
// to its WAL without a sync, so a process killed at once loses it: the
// last writes the member acknowledged, or held for a quorum the rest of
// which is now gone, would be dropped. With the rest of the cluster lost
// for good, every entry the survivor holds is the best history left, so
// all of it is kept. Only the reset's copy of the data is changed.
//
// etcd's WAL code ends the process where it cannot go on (a zap Fatal):
// its logger says why first, as the embedded member's does (a no-op
// logger would exit with code 1 and not a word).
func commitLogTail(etcdDir string, log *slog.Logger) (uint64, error) {
	lg := etcd.NewZapLogger(log, etcd.ZapLog{Label: "etcd raft log", Exit: os.Exit})
	walDir := filepath.Join(etcdDir, "member", "wal")
	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return 0, fmt.Errorf("read the raft log's snapshots: %w", err)
	}
	var at walpb.Snapshot
	sn, err := snap.New(lg, filepath.Join(etcdDir, "member", "snap")).LoadNewestAvailable(walSnaps)
	switch {
	case err == nil:
		at.Index, at.Term, at.ConfState = sn.Metadata.Index, sn.Metadata.Term, &sn.Metadata.ConfState
	case !errors.Is(err, snap.ErrNoSnapshot):
		return 0, fmt.Errorf("load the newest raft snapshot: %w", err)
	}
	w, err := wal.Open(lg, walDir, at)
	if err != nil {
		return 0, fmt.Errorf("open the raft log: %w", err)
	}
	_, st, ents, err := w.ReadAll()
	if err != nil {
		w.Close()
		return 0, fmt.Errorf("read the raft log: %w", err)
	}
	if len(ents) == 0 || st.Commit >= ents[len(ents)-1].Index {
		return 0, w.Close()
	}
	last := ents[len(ents)-1].Index
	raised := last - st.Commit
	st.Commit = last
	if err := w.Save(st, nil); err != nil {
		w.Close()
		return 0, fmt.Errorf("record the raft log's commit index: %w", err)
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return 0, fmt.Errorf("sync the raft log: %w", err)
	}
	return raised, w.Close()
}

// probeTimeout bounds the status request to each other member before a
// reset: a destroyed device answers nothing, a running one in
// milliseconds.
const probeTimeout = 2 * time.Second

// othersAnswering asks every other member the data in p knows of (its
// etcd database's membership) for its status, with the member's own
// certificate, all at once within probeTimeout, and names those that
// answer.
func othersAnswering(ctx context.Context, p Paths, self string, log *slog.Logger) ([]string, error) {
	members, err := membersIn(filepath.Join(p.EtcdDir, "member", "snap", "db"))
	if err != nil {
		return nil, err
	}
	tlsCfg, err := etcd.TLSConfig(p.CAFile, p.CertFile, p.KeyFile)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, m := range members {
		if m.Name != self {
			urls = append(urls, m.ClientURLs...)
		}
	}
	if len(urls) == 0 {
		return nil, nil
	}
	// No DialTimeout: New returns at once, and each Status has the
	// probe's bound.
	c, err := clientv3.New(clientv3.Config{Endpoints: urls, TLS: tlsCfg, Logger: clientLogger(log)})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var mu sync.Mutex
	var alive []string
	var wg sync.WaitGroup
	for _, m := range members {
		for _, u := range m.ClientURLs {
			if m.Name == self {
				continue
			}
			wg.Go(func() {
				if _, err := c.Status(ctx, u); err == nil {
					mu.Lock()
					alive = append(alive, m.Name+" at "+u)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	sort.Strings(alive)
	return alive, nil
}

// membersIn reads the membership etcd keeps in its database at path
// (read-only; the running member, if any, is stopped).
func membersIn(path string) ([]membership.Member, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open the member's database %s: %w", path, err)
	}
	defer db.Close()
	var out []membership.Member
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(schema.Members.Name())
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var m membership.Member
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("a member record of %s: %w", path, err)
			}
			out = append(out, m)
			return nil
		})
	})
	return out, err
}

// loopbackPorts are n ports free on 127.0.0.1 right now.
func loopbackPorts(n int) ([]string, error) {
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	return out, nil
}

// copyTree copies the directory src to dst (which must not exist): its
// directories and regular files, each file synced.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			return copyRegular(path, target)
		default:
			return fmt.Errorf("%s is neither a directory nor a regular file", path)
		}
	})
}

func copyRegular(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, errors.Join(err, os.Remove(dst)))
	}
	return nil
}
