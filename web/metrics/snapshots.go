package metrics

import (
	"fmt"
	"io"
	"slices"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// writeSnapshots writes the scheduled snapshots' series. The last
// success is the newest snapshot kept when none was taken since the
// start: a restart must neither hide an old one nor pass as a new one.
func writeSnapshots(w io.Writer, st clusterapi.Snapshots) {
	help(w, "leasehold_snapshot_interval_seconds", "gauge", "The scheduled snapshots' interval (--snapshot-interval).")
	fmt.Fprintf(w, "leasehold_snapshot_interval_seconds %d\n", st.IntervalSeconds)
	var last *clusterapi.SnapshotRun
	switch {
	case st.LastSuccess != nil:
		last = st.LastSuccess
	case len(st.Files) > 0:
		f := st.Files[0]
		last = &clusterapi.SnapshotRun{Time: f.Time, Revision: f.Revision, SizeBytes: f.SizeBytes}
	}
	if last != nil {
		help(w, "leasehold_snapshot_last_success_timestamp_seconds", "gauge", "When the newest scheduled snapshot that checked out was started, as a Unix timestamp (the newest file kept, after a restart).")
		fmt.Fprintf(w, "leasehold_snapshot_last_success_timestamp_seconds %d\n", last.Time.Unix())
		help(w, "leasehold_snapshot_last_success_revision", "gauge", "The storage revision of the newest scheduled snapshot.")
		fmt.Fprintf(w, "leasehold_snapshot_last_success_revision %d\n", last.Revision)
		help(w, "leasehold_snapshot_last_success_size_bytes", "gauge", "The size of the newest scheduled snapshot.")
		fmt.Fprintf(w, "leasehold_snapshot_last_success_size_bytes %d\n", last.SizeBytes)
	}
	if st.LastSuccess != nil {
		help(w, "leasehold_snapshot_last_success_duration_seconds", "gauge", "How long the last scheduled snapshot taken since the server started took (barrier read, paced write, check).")
		fmt.Fprintf(w, "leasehold_snapshot_last_success_duration_seconds %g\n", float64(st.LastSuccess.DurationMs)/1000)
	}
	if st.Last != nil {
		help(w, "leasehold_snapshot_last_attempt_timestamp_seconds", "gauge", "When the last scheduled snapshot since the server started was attempted, as a Unix timestamp.")
		fmt.Fprintf(w, "leasehold_snapshot_last_attempt_timestamp_seconds %d\n", st.Last.Time.Unix())
	}
	low := 0
	if st.Last != nil && st.Last.Result == clusterapi.SnapshotRefusedLowSpace {
		low = 1
	}
	help(w, "leasehold_snapshot_low_space", "gauge", "1 while the last scheduled snapshot was refused because it would have left less free space than --snapshot-min-free-bytes, else 0.")
	fmt.Fprintf(w, "leasehold_snapshot_low_space %d\n", low)
	help(w, "leasehold_snapshot_files", "gauge", "Scheduled snapshots kept in the snapshot directory.")
	fmt.Fprintf(w, "leasehold_snapshot_files %d\n", len(st.Files))
	help(w, "leasehold_snapshot_runs_total", "counter", "Scheduled snapshots attempted since the server started, by result: ok, refused_low_space, failed.")
	results := make([]string, 0, len(st.Runs))
	for r := range st.Runs {
		results = append(results, r)
	}
	slices.Sort(results)
	for _, r := range results {
		fmt.Fprintf(w, "leasehold_snapshot_runs_total{result=%s} %d\n", quote(r), st.Runs[r])
	}
}
