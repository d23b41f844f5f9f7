package dbcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold/cli"
	"github.com/leasehold/leasehold/datadir"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster"
)

// stageClusterRestore checks the snapshot at file and puts a copy where
// the next "serve --cluster-init" in dir starts a new cluster from it. A
// member's files already in dir are moved aside, never deleted; a member
// still running there is refused.
func stageClusterRestore(ctx context.Context, file string, dir datadir.Layout, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return cli.ExitFailure
	}
	info, err := cluster.CheckSnapshot(ctx, file, "", nil)
	if err != nil {
		return fail(err)
	}
	p := dir.Member()
	cdir := p.Dir
	var keptAs string
	if _, err := os.Stat(cdir); err == nil {
		if cluster.InUse(p) {
			return fail(fmt.Errorf("the cluster member in %s is running: stop it first", cdir))
		}
		keptAs = dir.MemberKeptAside(time.Now())
		if err := os.Rename(cdir, keptAs); err != nil {
			return fail(fmt.Errorf("keep the old member's files: %w", err))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		return fail(err)
	}
	tmp := p.RestoreSnapshot + ".tmp"
	if err := boltdb.CopyFile(ctx, file, tmp); err != nil {
		_ = os.Remove(tmp)
		return fail(err)
	}
	if err := os.Rename(tmp, p.RestoreSnapshot); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "staged %s (revision %d, %d keys) in %s\n", file, info.Revision, info.Keys, p.RestoreSnapshot)
	if keptAs != "" {
		fmt.Fprintf(stdout, "the old member's files are kept in %s\n", keptAs)
	}
	fmt.Fprintf(stdout, "next: leasehold serve --cluster-init --data-dir %s --cluster-token-file FILE --peer-listen HOST:PORT ... starts the restored cluster (a new CA, a new cluster ID);\n"+
		"      on the other devices, stop leasehold, move their %s aside, and --join the restored member\n", filepath.Clean(dir.Dir), filepath.Join("<data-dir>", filepath.Base(cdir)))
	return cli.ExitOK
}
