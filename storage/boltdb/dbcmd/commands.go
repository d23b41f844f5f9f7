package dbcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster"
)

// RemoteBackup streams a consistent copy of the database from the running
// server the kubeconfig file names to w; it returns the bytes written, the
// server's URL, and the revision the copy must reach (a cluster member's
// barrier, cluster.Member.Barrier; 0 when the server sets none).
type RemoteBackup func(ctx context.Context, kubeconfig string, w io.Writer) (n int64, server string, barrier int64, err error)

// CheckValue reports whether one stored value can be read back (the
// engine decodes it); storage itself knows only bytes.
type CheckValue func(key string, value []byte) error

// BackupCommand is "leasehold backup FILE". With no server running the
// database file is copied directly (read-only); while a server holds it,
// the copy is streamed from the server through remote with the kubeconfig
// it wrote (or --kubeconfig). Either way the copy is one consistent
// snapshot, checked before it is written to FILE: the file format, then
// every record through check. A record that does not decode is named on
// stderr and, without --keep-undecodable, keeps the copy from being
// written and makes the exit status 1. An existing FILE is replaced only
// with --force: a mistyped name must not destroy the last good backup.
// "leasehold backup list" lists the scheduled snapshots (backupList),
// through list with --kubeconfig.
func BackupCommand(remote RemoteBackup, list RemoteSnapshots, check CheckValue) cli.Command {
	return cli.Command{
		Name:     "backup",
		Synopsis: backupSynopsis + "\n" + listSynopsis,
		Summary:  "write a consistent copy of the database (from the running server or the file); list the scheduled snapshots",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			if len(args) > 0 && args[0] == "list" {
				return backupList(ctx, list, args[1:], stdout, stderr)
			}
			return backup(ctx, remote, check, args, stdout, stderr)
		},
	}
}

// RestoreCommand is "leasehold restore FILE": a single-device backup
// replaces the database file; a cluster snapshot is staged as the data of
// the new cluster the next "serve --cluster-init" starts.
var RestoreCommand = cli.Command{
	Name:     "restore",
	Synopsis: restoreSynopsis,
	Summary:  "replace the database with a checked backup, or stage a cluster snapshot for --cluster-init (server stopped)",
	Run:      restore,
}

// CompactCommand is "leasehold compact".
var CompactCommand = cli.Command{
	Name:     "compact",
	Synopsis: compactSynopsis,
	Summary:  "rewrite the database file to reclaim free space (server stopped)",
	Run:      compact,
}

const (
	backupSynopsis  = "backup [--data-dir D] [--kubeconfig K] [--force] [--keep-undecodable] FILE"
	restoreSynopsis = "restore [--data-dir D] FILE"
	compactSynopsis = "compact [--data-dir D]"
)

// dataDirFlags returns the flag set of a database command, with the data
// directory flag of serve (and its environment twin).
func dataDirFlags(synopsis, about string, stderr io.Writer) (*cli.FlagSet, *string) {
	fs := cli.NewFlagSet(synopsis, about, stderr)
	dir := fs.String("data-dir", datadir.Default, "the server's data `directory`")
	return fs, dir
}

func backup(ctx context.Context, remote RemoteBackup, check CheckValue, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags(backupSynopsis+"\n"+listSynopsis, `Writes a consistent copy of the database to FILE: from the file while no server
runs, else through the running server. On a cluster member the copy is a
snapshot of its embedded etcd member (etcd's maintenance Snapshot, taken by
that member), always through the running server; "leasehold restore" starts a
new cluster from it. The member first makes a linearizable read through the
raft leader and the snapshot must reach that read's revision, so that it holds
every write the cluster acknowledged before the backup: a member cut off from
its quorum refuses. The copy is checked before it is written: its format (a
snapshot's sha256 digest), and every record, which must decode. FILE is
fsynced, and its revision printed. An existing FILE is replaced only with
--force; a failed backup never touches it. "leasehold backup list" lists the
scheduled snapshots (leasehold backup list --help).`, stderr)
	kubeconfig := fs.String("kubeconfig", "", "back up through the server this kubeconfig `file` names (default: <data-dir>/kubeconfig when the database is in use)")
	force := fs.Bool("force", false, "replace FILE if it exists")
	keepUndecodable := fs.Bool("keep-undecodable", false, "write the copy even when some records do not decode (they are named on stderr either way)")
	prefix := fs.String("etcd-prefix", "/leasehold", "the server's etcd key `prefix` (a cluster member's snapshot: its records are checked below it)")
	file, err := fs.ParseWithArg(args, "FILE")
	if code, stop := fs.Stop(err); stop {
		return code
	}
	// Checked first, so that nothing is copied for nothing, and again at
	// the end, where a link (unlike a rename) cannot replace a file that
	// appeared meanwhile.
	if err := refuseExisting(file, *force); err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return cli.ExitFailure
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".leasehold-backup-*")
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return cli.ExitFailure
	}
	defer os.Remove(tmp.Name())
	layout, _, err := datadir.Inspect(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return cli.ExitFailure
	}
	n, via, barrier, err := backupTo(ctx, tmp, remote, layout, *kubeconfig)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	var bad []string
	var rev int64
	if err == nil {
		bad, rev, err = checkCopy(ctx, tmp.Name(), *prefix, check, stderr)
	}
	if err == nil && rev < barrier {
		err = fmt.Errorf("the copy's revision %d is below %d, the revision of the server's linearizable read before it: "+
			"it misses acknowledged writes, %s not written; take the backup again", rev, barrier, file)
	}
	if err == nil && len(bad) > 0 && !*keepUndecodable {
		err = fmt.Errorf("%d record(s) do not decode, %s not written: delete them (DELETE with ignoreStoreReadErrorWithClusterBreakingPotential=true), or pass --keep-undecodable to keep them in the copy", len(bad), file)
	}
	if err == nil {
		err = publish(tmp.Name(), file, *force)
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes, revision %d, %s)\n", file, n, rev, via)
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "leasehold backup: warning: the copy holds %d record(s) that do not decode (--keep-undecodable)\n", len(bad))
	}
	return cli.ExitOK
}

// refuseExisting fails when file exists and may not be replaced.
func refuseExisting(file string, replace bool) error {
	if replace {
		return nil
	}
	if _, err := os.Lstat(file); err == nil {
		return fmt.Errorf("%s exists: pass --force to replace it", file)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// publish moves the finished copy at tmp to file. With replace it renames
// (atomic, replacing any file there). Without, it links, which fails if
// file appeared meanwhile, and removes tmp; on a file system without hard
// links (FAT on a USB stick) it checks once more and renames.
func publish(tmp, file string, replace bool) error {
	if replace {
		return os.Rename(tmp, file)
	}
	err := os.Link(tmp, file)
	switch {
	case err == nil:
		return os.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s exists: pass --force to replace it", file)
	}
	if err := refuseExisting(file, false); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// checkCopy checks a finished copy, a cluster snapshot or a bbolt store,
// and returns the keys of the records that do not decode and the copy's
// revision.
func checkCopy(ctx context.Context, path, prefix string, check CheckValue, stderr io.Writer) ([]string, int64, error) {
	snap, err := cluster.IsSnapshot(path)
	if err != nil {
		return nil, 0, err
	}
	if !snap {
		if err := boltdb.CheckFile(ctx, path); err != nil {
			return nil, 0, err
		}
		return undecodable(ctx, path, check, stderr)
	}
	var bad []string
	info, err := cluster.CheckSnapshot(ctx, path, prefix, func(key string, value []byte) error {
		if check != nil {
			if cerr := check(key, value); cerr != nil {
				bad = append(bad, key)
				fmt.Fprintf(stderr, "leasehold backup: record %s does not decode: %v\n", key, cerr)
			}
		}
		return nil
	})
	return bad, info.Revision, err
}

// undecodable names on stderr, and returns, the keys of the records of
// the store at path that check (when set) refuses, and its revision.
func undecodable(ctx context.Context, path string, check CheckValue, stderr io.Writer) ([]string, int64, error) {
	var bad []string
	rev, err := boltdb.ExportFile(ctx, path, func(key string, value []byte) error {
		if check == nil {
			return nil
		}
		if cerr := check(key, value); cerr != nil {
			bad = append(bad, key)
			fmt.Fprintf(stderr, "leasehold backup: record %s does not decode: %v\n", key, cerr)
		}
		return nil
	})
	return bad, rev, err
}

// backupTo copies the database to w: from the file when no server holds
// it, else through the running server, which may name a revision the
// copy must reach.
func backupTo(ctx context.Context, w io.Writer, remote RemoteBackup, dir datadir.Layout, kubeconfig string) (n int64, via string, barrier int64, err error) {
	if _, err := os.Stat(dir.Member().State); kubeconfig == "" && err == nil {
		// A member's data is etcd's, which only the running member reads.
		kubeconfig = dir.Kubeconfig()
	}
	if kubeconfig == "" {
		path := dir.Database()
		n, err := boltdb.BackupFile(ctx, path, w)
		if !errors.Is(err, boltdb.ErrLocked) {
			return n, "from " + path, 0, err
		}
		kubeconfig = dir.Kubeconfig()
		if _, serr := os.Stat(kubeconfig); serr != nil {
			return 0, "", 0, fmt.Errorf("%w; and no %s to reach the running server: pass --kubeconfig", err, kubeconfig)
		}
	}
	n, server, barrier, err := remote(ctx, kubeconfig, w)
	return n, "from the server at " + server, barrier, err
}

// restore swaps a checked FILE in, with the server stopped (the old file
// is kept as leasehold.db.pre-restore), or stages a cluster snapshot.
func restore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags(restoreSynopsis, `Replaces the database with FILE once it checks out; the old file is kept as
leasehold.db.pre-restore. The server must be stopped.

A cluster snapshot (from "leasehold backup" on a member) restores a whole
cluster, as etcd's procedure does: on one device, restore stages it in the
data directory (a member's old files there are kept as cluster.pre-restore-*),
and "leasehold serve --cluster-init" then starts a new single-member cluster
from it, with a new CA and cluster ID, its revision bumped by 1000000000 and
older ones compacted (clients relist). The other devices empty their cluster
directory and --join it. Members of the old cluster cannot join the new one.`, stderr)
	file, err := fs.ParseWithArg(args, "FILE")
	if code, stop := fs.Stop(err); stop {
		return code
	}
	layout, err := datadir.Open(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return cli.ExitFailure
	}
	snap, err := cluster.IsSnapshot(file)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return cli.ExitFailure
	}
	if snap {
		return stageClusterRestore(ctx, file, layout, stdout, stderr)
	}
	if _, err := os.Stat(layout.Member().State); err == nil {
		fmt.Fprintf(stderr, "leasehold restore: %s holds a cluster member, and %s is a single-device backup: restore a cluster snapshot, or restore into another data directory\n", *dir, file)
		return cli.ExitFailure
	}
	path := layout.Database()
	if err := boltdb.Restore(ctx, file, path); err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "restored %s from %s; watches resume with a relist (the history starts afresh)\n", path, file)
	return cli.ExitOK
}

// compact rewrites the database file without its free pages, with the
// server stopped.
func compact(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags(compactSynopsis, "Rewrites the database file without its free pages. The server must be stopped.", stderr)
	if code, stop := fs.Stop(fs.ParseNoArgs(args)); stop {
		return code
	}
	layout, _, err := datadir.Inspect(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold compact: %v\n", err)
		return cli.ExitFailure
	}
	path := layout.Database()
	before, after, err := boltdb.CompactFile(ctx, path)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold compact: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "compacted %s: %d -> %d bytes\n", path, before, after)
	return cli.ExitOK
}
