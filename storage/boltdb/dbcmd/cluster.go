package dbcmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"time"

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

// ClusterResetCommand is "leasehold cluster reset" (the cluster command
// runs it): the recovery of a surviving member after a permanent loss of
// quorum (cluster.Reset).
var ClusterResetCommand = cli.Command{
	Name:     "reset",
	Synopsis: resetSynopsis,
	Summary:  "after a quorum lost for good: a stopped survivor becomes a one-member cluster",
	Run:      clusterReset,
}

const resetSynopsis = "cluster reset [--data-dir D]"

func clusterReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags(resetSynopsis, `After a permanent loss of quorum (most members destroyed), on a surviving
member, with its server stopped: as etcd's --force-new-cluster, its data,
every write its log holds included, becomes a new one-member cluster, staged
for the next "serve --cluster-init" (a new CA, a new cluster ID, the token it
is given). The old cluster's members and replicas are fenced out: their
certificates are of the old CA. The member's old files are moved aside, never
deleted. The other devices rejoin with emptied data directories. Run it on
one surviving member only: the member with the highest raft index ("leasehold
cluster members" while it ran) holds the most writes. It refuses while another
member of the cluster answers (that would make a second cluster beside it):
stop leasehold on every other device first.`, stderr)
	if code, stop := fs.Stop(fs.ParseNoArgs(args)); stop {
		return code
	}
	layout, _, err := datadir.Inspect(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold cluster reset: %v\n", err)
		return cli.ExitFailure
	}
	start := time.Now()
	// etcd's own lines only when something is wrong: the forced start
	// of a member without its peers warns as it is meant to.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	res, err := cluster.Reset(ctx, layout, log)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold cluster reset: %v\n", err)
		return cli.ExitFailure
	}
	st := res.State
	fmt.Fprintf(stdout, "reset member %s: its data (revision %d, %d keys) is staged in %s as a new one-member cluster (%v)\n",
		st.Name, res.Info.Revision, res.Info.Keys, res.Snapshot, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(stdout, "the old cluster's files are kept in %s\n", res.KeptAs)
	flags := fmt.Sprintf("--member-name %s --peer-listen %s --cluster-client-listen %s", st.Name, st.ListenPeer, st.ListenClient)
	if u, err := url.Parse(st.AdvertisePeer); err == nil {
		if host, _, _ := net.SplitHostPort(st.ListenPeer); host != u.Hostname() {
			flags += " --advertise-host " + u.Hostname()
		}
	}
	fmt.Fprintf(stdout, "next: leasehold serve --cluster-init --data-dir %s --cluster-token-file NEW-TOKEN-FILE %s ...\n"+
		"      starts it, with a new token; on every other device: stop leasehold, move <data-dir>/%s aside, and --join this member\n",
		filepath.Clean(layout.Dir), flags, filepath.Base(layout.Member().Dir))
	return cli.ExitOK
}
