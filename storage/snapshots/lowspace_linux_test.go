package snapshots

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted
// at cleanup: a real small file system to fill, not a faked free-space
// figure.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	testneeds.Root(t, "mount(8) of a small tmpfs for the snapshots to fill")
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dk", size>>10), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %d-byte tmpfs: %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// countingWriter counts the bytes written to it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestSnapshotsNeverFillTheDisk, on a real tmpfs 2.2 times a snapshot's
// size n with a floor of n/4: the first snapshot fits; the second would
// leave 0.2n and is refused before anything is written; in another
// directory, with no snapshot there to estimate from, the copy starts and
// is abandoned as it crosses the floor; and with no floor at all, a disk
// that fills up mid-copy ends the snapshot as refused. Nothing is left
// behind, and the first snapshot stays.
func TestSnapshotsNeverFillTheDisk(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, 300, 10<<10)
	var cw countingWriter
	if _, err := store.Backup(ctx, &cw); err != nil {
		t.Fatal(err)
	}
	n := cw.n
	mnt := mountTmpfs(t, 2*n+n/5)
	floor := n / 4
	dirA, dirB := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sched := New(Options{Flags: Flags{Interval: 1, Retention: 5, Dir: dirA, MinFreeBytes: floor}, Source: Source{Backup: store.Backup}, Logger: testLogger(t)})
	first := sched.TakeOne(ctx)
	if first.Result != clusterapi.SnapshotOK {
		t.Fatalf("the first snapshot (%d bytes on a %d-byte disk, floor %d): %+v", n, 2*n+n/5, floor, first)
	}
	second := sched.TakeOne(ctx)
	if second.Result != clusterapi.SnapshotRefusedLowSpace || !strings.Contains(second.Error, "--snapshot-min-free-bytes") {
		t.Fatalf("the second snapshot, which would leave about %d bytes free: %+v; want it refused below the floor of %d", n/5, second, floor)
	}
	if got := names(t, dirA); len(got) != 1 || got[0] != first.File {
		t.Errorf("after the refusal the directory holds %v, want only %s", got, first.File)
	}
	status := sched.Status(ctx)
	if status.Last == nil || status.Last.Result != clusterapi.SnapshotRefusedLowSpace || status.LastSuccess == nil || status.LastSuccess.File != first.File ||
		status.Runs[clusterapi.SnapshotOK] != 1 || status.Runs[clusterapi.SnapshotRefusedLowSpace] != 1 {
		t.Errorf("status after a success and a refusal: %+v", status)
	}

	blind := New(Options{Flags: Flags{Interval: 1, Retention: 5, Dir: dirB, MinFreeBytes: floor}, Source: Source{Backup: store.Backup}, Logger: testLogger(t)})
	run := blind.TakeOne(ctx)
	if run.Result != clusterapi.SnapshotRefusedLowSpace || !strings.Contains(run.Error, "abandoned") {
		t.Errorf("a snapshot crossing the floor while written: %+v; want it abandoned", run)
	}
	if got := names(t, dirB); len(got) != 0 {
		t.Errorf("the abandoned copy left %v behind", got)
	}

	small := mountTmpfs(t, n/2)
	full := New(Options{Flags: Flags{Interval: 1, Retention: 5, Dir: small}, Source: Source{Backup: store.Backup}, Logger: testLogger(t)})
	run = full.TakeOne(ctx)
	if run.Result != clusterapi.SnapshotRefusedLowSpace || !strings.Contains(run.Error, "filled up") {
		t.Errorf("a snapshot larger than its disk, without a floor: %+v; want it refused as the disk filled", run)
	}
	if got := names(t, small); len(got) != 0 {
		t.Errorf("the failed snapshot left %v behind", got)
	}
	if got := names(t, dirA); len(got) != 1 || got[0] != first.File {
		t.Errorf("the first snapshot's directory holds %v, want %s still", got, first.File)
	}
}
