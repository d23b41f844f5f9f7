package dbcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster"
)

// stageClusterRestore stages the cluster snapshot at file for the next
// "serve --cluster-init" in dir (cluster.StageRestore) and says what to
// do next.
func stageClusterRestore(ctx context.Context, file string, dir datadir.Layout, stdout, stderr io.Writer) int {
	st, err := cluster.StageRestore(ctx, file, dir, boltdb.CopyFile)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold restore: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "staged %s (revision %d, %d keys) in %s\n", file, st.Info.Revision, st.Info.Keys, st.Snapshot)
	if st.KeptAs != "" {
		fmt.Fprintf(stdout, "the old member's files are kept in %s\n", st.KeptAs)
	}
	fmt.Fprintf(stdout, "next: leasehold serve --cluster-init --data-dir %s --cluster-token-file FILE --peer-listen HOST:PORT ... starts the restored cluster (a new CA, a new cluster ID);\n"+
		"      on the other devices, stop leasehold, move their %s aside, and --join the restored member\n", filepath.Clean(dir.Dir), filepath.Join("<data-dir>", filepath.Base(dir.Member().Dir)))
	return cli.ExitOK
}
