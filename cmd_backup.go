package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web/leaseclient"
)

// dataDirFlags parses "--data-dir D [FILE]" style command lines with the
// serve flags' environment twin for --data-dir.
func dataDirFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("leasehold "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := "leasehold-data"
	if v, ok := os.LookupEnv(envName("data-dir")); ok {
		def = v
	}
	dir := fs.String("data-dir", def, "the server's data `directory` (env "+envName("data-dir")+")")
	return fs, dir
}

// parseWithFile parses args with exactly one positional FILE, before or
// after the flags.
func parseWithFile(fs *flag.FlagSet, args []string) (string, error) {
	var file string
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		return "", errors.New("expected exactly one FILE")
	}
	return file, nil
}

// runBackup implements "leasehold backup FILE". With no server running
// the database file is copied directly (read-only); while a server holds
// it, the copy is streamed from the server's /leasehold/v1/backup with
// the kubeconfig it wrote (or --kubeconfig). Either way the copy is one
// consistent snapshot, checked before it replaces FILE.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("backup", stderr)
	kubeconfig := fs.String("kubeconfig", "", "back up through the server this kubeconfig names (default: <data-dir>/kubeconfig when the database is in use)")
	file, err := parseWithFile(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return 2
	}
	dbPath := filepath.Join(*dir, "leasehold.db")
	tmp, err := os.CreateTemp(filepath.Dir(file), ".leasehold-backup-*")
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return 1
	}
	defer os.Remove(tmp.Name())
	n, via, err := backupTo(ctx, tmp, dbPath, *dir, *kubeconfig)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = boltdb.CheckFile(ctx, tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes, %s)\n", file, n, via)
	return 0
}

func backupTo(ctx context.Context, w io.Writer, dbPath, dir, kubeconfig string) (int64, string, error) {
	if kubeconfig == "" {
		n, err := boltdb.BackupFile(ctx, dbPath, w)
		if !errors.Is(err, boltdb.ErrLocked) {
			return n, "from " + dbPath, err
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if _, serr := os.Stat(kubeconfig); serr != nil {
			return 0, "", fmt.Errorf("%w; and no %s to reach the running server: pass --kubeconfig", err, kubeconfig)
		}
	}
	cfg, err := leaseclient.LoadKubeconfig(kubeconfig, "")
	if err != nil {
		return 0, "", err
	}
	c, err := leaseclient.New(cfg)
	if err != nil {
		return 0, "", err
	}
	n, err := c.Download(ctx, "/leasehold/v1/backup", w)
	return n, "from the server at " + c.Server(), err
}

// runRestore implements "leasehold restore FILE": with the server
// stopped, check FILE and swap it in (the old file is kept as
// leasehold.db.pre-restore).
func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("restore", stderr)
	file, err := parseWithFile(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return 2
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return 1
	}
	dbPath := filepath.Join(*dir, "leasehold.db")
	if err := boltdb.Restore(ctx, file, dbPath); err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored %s from %s; watches resume with a relist (the history starts afresh)\n", dbPath, file)
	return 0
}

// runCompact implements "leasehold compact": with the server stopped,
// rewrite the database file without its free pages.
func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("compact", stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "leasehold compact: unexpected arguments %q\n", fs.Args())
		return 2
	}
	dbPath := filepath.Join(*dir, "leasehold.db")
	before, after, err := boltdb.CompactFile(ctx, dbPath)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold compact: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "compacted %s: %d -> %d bytes\n", dbPath, before, after)
	return 0
}
