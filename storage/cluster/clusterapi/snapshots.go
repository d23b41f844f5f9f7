package clusterapi

import (
	"fmt"
	"time"
)

// SnapshotsPath answers GET with Snapshots: the scheduled snapshots of the
// answering server (a cluster member or a single device), which "leasehold
// backup list", "leasehold cluster status" and the UI show.
const SnapshotsPath = "/leasehold/v1/snapshots"

// Snapshot results, as SnapshotRun.Result and the
// leasehold_snapshot_runs_total metric's result label name them.
const (
	SnapshotOK = "ok"
	// SnapshotRefusedLowSpace: the snapshot would have left less free
	// space than the floor (--snapshot-min-free-bytes), so it was not
	// taken (or was abandoned as the disk filled).
	SnapshotRefusedLowSpace = "refused_low_space"
	// SnapshotFailed: anything else (no quorum for the barrier read, a
	// write error, a snapshot that did not check out).
	SnapshotFailed = "failed"
)

// Snapshots is GET SnapshotsPath: the schedule, the last runs and the
// snapshots kept.
type Snapshots struct {
	// Dir is where the snapshots are written (--snapshot-dir).
	Dir string `json:"dir"`
	// IntervalSeconds is --snapshot-interval (0: no schedule, only the
	// files found are listed).
	IntervalSeconds int64 `json:"intervalSeconds"`
	Retention       int   `json:"retention"`
	MinFreeBytes    int64 `json:"minFreeBytes"`
	// Next is when the next snapshot is due (absent without a schedule).
	Next *time.Time `json:"next,omitempty"`
	// Last is the last attempt since the server started, LastSuccess the
	// last one that succeeded (absent before the first).
	Last        *SnapshotRun `json:"last,omitempty"`
	LastSuccess *SnapshotRun `json:"lastSuccess,omitempty"`
	// Runs counts the attempts since the server started by result.
	Runs map[string]uint64 `json:"runs"`
	// Files are the snapshots in Dir, newest first; ListError says why
	// the directory could not be read.
	Files     []SnapshotFile `json:"files"`
	ListError string         `json:"listError,omitempty"`
}

// SnapshotRun is one scheduled snapshot attempt.
type SnapshotRun struct {
	Time time.Time `json:"time"`
	// Result is SnapshotOK, SnapshotRefusedLowSpace or SnapshotFailed;
	// Error says why when it is not SnapshotOK.
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	// File, Revision and SizeBytes describe the snapshot written.
	File       string `json:"file,omitempty"`
	Revision   int64  `json:"revision,omitempty"`
	SizeBytes  int64  `json:"sizeBytes,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// FreeBytes is the free space of the snapshot directory's file system
	// after the attempt.
	FreeBytes int64 `json:"freeBytes"`
}

// SnapshotFile is one snapshot kept in the directory.
type SnapshotFile struct {
	Name      string    `json:"name"`
	Time      time.Time `json:"time"`
	Revision  int64     `json:"revision"`
	SizeBytes int64     `json:"sizeBytes"`
	// Checked says how far the file is known good: "checked when written"
	// (a file gets its name only once it checked out), "ok" when it was
	// checked again just now, or the reason it failed that check.
	Checked string `json:"checked"`
}

// Summary describes the run in one line, as "leasehold cluster status"
// and "leasehold backup list" print it: its time, age and result, and
// the snapshot's file, revision and size or why there is none ("none
// since the server started" for a nil run).
func (r *SnapshotRun) Summary(now time.Time) string {
	if r == nil {
		return "none since the server started"
	}
	when := fmt.Sprintf("%s (%s ago)", r.Time.UTC().Format(time.RFC3339), now.Sub(r.Time).Round(time.Second))
	if r.Result == SnapshotOK {
		s := fmt.Sprintf("%s ok: %s, revision %d, %s", when, r.File, r.Revision, SizeText(r.SizeBytes))
		if r.DurationMs > 0 {
			s += ", took " + (time.Duration(r.DurationMs) * time.Millisecond).String()
		}
		return s
	}
	return fmt.Sprintf("%s %s: %s", when, r.Result, r.Error)
}

// SizeText is a size in B, KiB or MiB, for people.
func SizeText(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
