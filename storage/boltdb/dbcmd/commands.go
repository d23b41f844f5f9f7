package dbcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web/cli"
)

// RemoteBackup streams a consistent copy of the database from the running
// server the kubeconfig file names to w; it returns the bytes written and
// the server's URL.
type RemoteBackup func(ctx context.Context, kubeconfig string, w io.Writer) (n int64, server string, err error)

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
func BackupCommand(remote RemoteBackup, check CheckValue) cli.Command {
	return cli.Command{
		Name:     "backup",
		Synopsis: backupSynopsis,
		Summary:  "write a consistent copy of the database (from the running server or the file)",
		Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return backup(ctx, remote, check, args, stdout, stderr)
		},
	}
}

// RestoreCommand is "leasehold restore FILE".
var RestoreCommand = cli.Command{
	Name:     "restore",
	Synopsis: restoreSynopsis,
	Summary:  "replace the database with a checked backup (server stopped)",
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
	backupSynopsis  = "backup [--data-dir D] [--force] [--keep-undecodable] FILE"
	restoreSynopsis = "restore [--data-dir D] FILE"
	compactSynopsis = "compact [--data-dir D]"
)

// dataDirFlags returns the flag set of a database command, with the data
// directory flag of serve (and its environment twin).
func dataDirFlags(synopsis, about string, stderr io.Writer) (*cli.FlagSet, *string) {
	fs := cli.NewFlagSet(synopsis, about, stderr)
	dir := fs.String("data-dir", "leasehold-data", "the server's data `directory`")
	return fs, dir
}

func dbPath(dir string) string { return filepath.Join(dir, "leasehold.db") }

func backup(ctx context.Context, remote RemoteBackup, check CheckValue, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags(backupSynopsis, `Writes a consistent copy of the database to FILE: from the file while no server
runs, else through the running server. The copy is checked before it is
written: its format, and every record, which must decode. An existing FILE is
replaced only with --force; a failed backup never touches it.`, stderr)
	kubeconfig := fs.String("kubeconfig", "", "back up through the server this kubeconfig `file` names (default: <data-dir>/kubeconfig when the database is in use)")
	force := fs.Bool("force", false, "replace FILE if it exists")
	keepUndecodable := fs.Bool("keep-undecodable", false, "write the copy even when some records do not decode (they are named on stderr either way)")
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
	n, via, err := backupTo(ctx, tmp, remote, *dir, *kubeconfig)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = boltdb.CheckFile(ctx, tmp.Name())
	}
	var bad []string
	if err == nil && check != nil {
		bad, err = undecodable(ctx, tmp.Name(), check, stderr)
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
	fmt.Fprintf(stdout, "wrote %s (%d bytes, %s)\n", file, n, via)
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

// undecodable names on stderr, and returns, the keys of the records of
// the store at path that check refuses.
func undecodable(ctx context.Context, path string, check CheckValue, stderr io.Writer) ([]string, error) {
	var bad []string
	err := boltdb.ScanFile(ctx, path, func(key string, value []byte) error {
		if cerr := check(key, value); cerr != nil {
			bad = append(bad, key)
			fmt.Fprintf(stderr, "leasehold backup: record %s does not decode: %v\n", key, cerr)
		}
		return nil
	})
	return bad, err
}

// backupTo copies the database to w: from the file when no server holds
// it, else through the running server.
func backupTo(ctx context.Context, w io.Writer, remote RemoteBackup, dir, kubeconfig string) (int64, string, error) {
	if kubeconfig == "" {
		path := dbPath(dir)
		n, err := boltdb.BackupFile(ctx, path, w)
		if !errors.Is(err, boltdb.ErrLocked) {
			return n, "from " + path, err
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if _, serr := os.Stat(kubeconfig); serr != nil {
			return 0, "", fmt.Errorf("%w; and no %s to reach the running server: pass --kubeconfig", err, kubeconfig)
		}
	}
	n, server, err := remote(ctx, kubeconfig, w)
	return n, "from the server at " + server, err
}

// restore swaps a checked FILE in, with the server stopped (the old file
// is kept as leasehold.db.pre-restore).
func restore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags(restoreSynopsis, "Replaces the database with FILE once it checks out; the old file is kept as\nleasehold.db.pre-restore. The server must be stopped.", stderr)
	file, err := fs.ParseWithArg(args, "FILE")
	if code, stop := fs.Stop(err); stop {
		return code
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return cli.ExitFailure
	}
	path := dbPath(*dir)
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
	path := dbPath(*dir)
	before, after, err := boltdb.CompactFile(ctx, path)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold compact: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "compacted %s: %d -> %d bytes\n", path, before, after)
	return cli.ExitOK
}
