package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/leasehold/leasehold/internal/datadir"
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
// nobody else knows, with etcd's --force-new-cluster: etcd commits every
// entry of its log and drops the other members. A barrier read
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
