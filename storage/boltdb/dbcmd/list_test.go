package dbcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/storage/snapshots"
)

// TestScheduledSnapshotListAndRestore: scheduled snapshots of a real
// single-device store are listed by "backup list" on the stopped data
// directory, each checked again; a damaged one is named and fails the
// listing; and "leasehold restore" of a scheduled snapshot puts its
// revision back.
func TestScheduledSnapshotListAndRestore(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	layout := datadir.At(dataDir)
	st, err := boltdb.Open(ctx, layout.Database(), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sched := snapshots.New(snapshots.Options{Flags: snapshots.Flags{Interval: time.Hour, Retention: 3, Dir: layout.Snapshots()},
		Source: snapshots.Source{Backup: st.Backup}})
	var runs []clusterapi.SnapshotRun
	for i := range 2 {
		if _, err := st.Create(ctx, "/registry/leases/default/l"+string(rune('a'+i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
		run := sched.TakeOne(ctx)
		if run.Result != clusterapi.SnapshotOK {
			t.Fatalf("snapshot %d: %+v", i, run)
		}
		runs = append(runs, run)
		time.Sleep(1100 * time.Millisecond) // names are to the second
	}
	if _, err := st.Create(ctx, "/registry/leases/default/after", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	list := func() (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := BackupCommand(nil, nil, nil).Run(ctx, []string{"list", "--data-dir", dataDir}, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := list()
	if code != cli.ExitOK || strings.Count(out, "leasehold-") != 2 || strings.Count(out, "  ok\n") != 2 ||
		strings.Index(out, runs[1].File) > strings.Index(out, runs[0].File) {
		t.Fatalf("backup list: exit %d, stdout %q, stderr %q; want both snapshots, newest first, checked ok", code, out, errOut)
	}

	// The newer one restores with the existing command.
	var stdout, stderr bytes.Buffer
	if code := RestoreCommand.Run(ctx, []string{"--data-dir", dataDir, filepath.Join(layout.Snapshots(), runs[1].File)}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("restore %s: exit %d, %s%s", runs[1].File, code, stdout.String(), stderr.String())
	}
	restored, err := boltdb.Open(ctx, layout.Database(), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rev, _ := restored.CurrentRevision(ctx)
	_, afterErr := restored.Get(ctx, "/registry/leases/default/after")
	restored.Close()
	if rev != runs[1].Revision || afterErr == nil {
		t.Errorf("restored from %s: revision %d (want %d), the later write: %v (want it absent)", runs[1].File, rev, runs[1].Revision, afterErr)
	}

	// A damaged snapshot fails the listing, by name.
	damaged := filepath.Join(layout.Snapshots(), runs[0].File)
	data, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4096; i < len(data) && i < 3*4096; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := list(); code != cli.ExitFailure || !strings.Contains(errOut, runs[0].File+" does not check out") {
		t.Errorf("backup list with a damaged snapshot: exit %d, stdout %q, stderr %q; want exit 1 naming it", code, out, errOut)
	}
}
