package dbcmd

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/storage/snapshots"
)

// RemoteSnapshots asks the running server the kubeconfig file names for
// its scheduled snapshots (GET clusterapi.SnapshotsPath); it returns the
// server's URL too.
type RemoteSnapshots func(ctx context.Context, kubeconfig string) (clusterapi.Snapshots, string, error)

const listSynopsis = "backup list [--data-dir D] [--snapshot-dir S] [--no-check] [--kubeconfig K]"

// backupList is "leasehold backup list": the scheduled snapshots of a
// data directory (the server running or not), or of the server a
// kubeconfig names.
func backupList(ctx context.Context, remote RemoteSnapshots, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags(listSynopsis, `Lists the scheduled snapshots (--snapshot-interval), newest first: their time,
revision, size and whether they check out. Locally, from the snapshot
directory (<data-dir>/snapshots, or --snapshot-dir), with the server running
or stopped: each file is checked again (its digest or format, bbolt's page
check, every record), which reads it whole (--no-check skips that). With
--kubeconfig, from the server it names, with its schedule and the result of
its last snapshot. "leasehold restore FILE" restores any of them.`, stderr)
	snapDir := fs.String("snapshot-dir", "", "the snapshot `directory` (default: <data-dir>/snapshots)")
	noCheck := fs.Bool("no-check", false, "list without checking each file again")
	kubeconfig := fs.String("kubeconfig", "", "list the snapshots of the server this kubeconfig `file` names")
	if code, stop := fs.Stop(fs.ParseNoArgs(args)); stop {
		return code
	}
	if *kubeconfig != "" {
		if remote == nil {
			fmt.Fprintln(stderr, "leasehold backup list: --kubeconfig is not available in this build")
			return cli.ExitFailure
		}
		st, server, err := remote(ctx, *kubeconfig)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold backup list: %v\n", err)
			return cli.ExitFailure
		}
		fmt.Fprintf(stdout, "snapshots of the server at %s, in %s\n", server, st.Dir)
		printSchedule(stdout, st, time.Now())
		if st.ListError != "" {
			fmt.Fprintf(stderr, "leasehold backup list: %s\n", st.ListError)
			return cli.ExitFailure
		}
		printFiles(stdout, st.Files)
		return cli.ExitOK
	}
	path := *snapDir
	if path == "" {
		path = datadir.At(*dir).Snapshots()
	}
	files, err := snapshots.List(ctx, path, !*noCheck)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold backup list: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "snapshots in %s\n", path)
	printFiles(stdout, files)
	for _, f := range files {
		if f.Checked != "ok" && f.Checked != snapshots.CheckedWhenWritten {
			fmt.Fprintf(stderr, "leasehold backup list: %s does not check out: %s\n", f.Name, f.Checked)
			return cli.ExitFailure
		}
	}
	return cli.ExitOK
}

// printSchedule prints a server's snapshot schedule and its last runs.
func printSchedule(w io.Writer, st clusterapi.Snapshots, now time.Time) {
	if st.IntervalSeconds > 0 {
		fmt.Fprintf(w, "schedule: every %s, the newest %d kept, at least %s left free", time.Duration(st.IntervalSeconds)*time.Second, st.Retention, clusterapi.SizeText(st.MinFreeBytes))
		if st.Next != nil {
			fmt.Fprintf(w, "; next in %s", st.Next.Sub(now).Round(time.Second))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "last: %s\n", st.Last.Summary(now))
}

func printFiles(w io.Writer, files []clusterapi.SnapshotFile) {
	if len(files) == 0 {
		fmt.Fprintln(w, "no snapshots")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTIME\tREVISION\tSIZE\tCHECKED")
	for _, f := range files {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", f.Name, f.Time.UTC().Format(time.RFC3339), f.Revision, clusterapi.SizeText(f.SizeBytes), f.Checked)
	}
	tw.Flush()
}
