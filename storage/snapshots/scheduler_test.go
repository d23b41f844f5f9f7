package snapshots

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// openStore opens a real bbolt store in a temporary directory with n
// records of size bytes each.
func openStore(t *testing.T, n, size int) *boltdb.Store {
	t.Helper()
	ctx := context.Background()
	s, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "leasehold.db"), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	value := bytes.Repeat([]byte("v"), size)
	for i := range n {
		if _, err := s.Create(ctx, fmt.Sprintf("/registry/leases/default/l%05d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// source is the store's backup as the server hands it to the scheduler.
func source(s *boltdb.Store) Source {
	return Source{Backup: s.Backup, Size: func(ctx context.Context) (int64, error) {
		st, err := s.Stats(ctx)
		return st.SizeBytes, err
	}}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// waitRuns waits until the scheduler has made at least n attempts.
func waitRuns(t *testing.T, s *Scheduler, n uint64) clusterapi.Snapshots {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := s.Status(context.Background())
		var total uint64
		for _, v := range st.Runs {
			total += v
		}
		if total >= n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshot attempts within a minute, want %d: %+v", total, n, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestScheduleWritesCheckedSnapshotsAndKeepsTheNewest: on a one-second
// schedule over a real bbolt store taking writes, each snapshot is named
// by its time and revision, checks out, holds the writes made before it,
// and only the newest Retention are kept; no temporary file stays.
func TestScheduleWritesCheckedSnapshotsAndKeepsTheNewest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := openStore(t, 200, 100)
	dir := filepath.Join(t.TempDir(), "snapshots")
	// A leftover of a crash mid-snapshot: removed at the start.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, ".leasehold-snapshot-123.tmp")
	if err := os.WriteFile(leftover, []byte("cut short"), 0o600); err != nil {
		t.Fatal(err)
	}
	sched := New(Options{Flags: Flags{Interval: time.Second, Retention: 2, Dir: dir, BytesPerSec: 64 << 20},
		Source: source(store), Logger: testLogger(t), SettleDelay: 10 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); sched.Run(ctx) }()
	// Writes go on between the snapshots.
	var lastRev int64
	for i := 0; ; i++ {
		kv, err := store.Create(ctx, fmt.Sprintf("/registry/leases/default/later%05d", i), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		lastRev = kv.ModRevision
		st := sched.Status(ctx)
		if st.Runs[clusterapi.SnapshotOK] >= 4 {
			break
		}
		if st.Runs[clusterapi.SnapshotFailed]+st.Runs[clusterapi.SnapshotRefusedLowSpace] > 0 {
			t.Fatalf("a snapshot did not succeed: %+v", st.Last)
		}
		if i > 100000 {
			t.Fatal("no 4 snapshots")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	st := sched.Status(context.Background())
	if len(st.Files) != 2 {
		t.Fatalf("%d snapshots kept after %d, want the newest 2: %+v", len(st.Files), st.Runs[clusterapi.SnapshotOK], st.Files)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the leftover temporary file is still there: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the directory holds %d entries, want the 2 snapshots only", len(entries))
	}
	newest := st.Files[0]
	if st.LastSuccess == nil || st.LastSuccess.File != newest.Name || newest.Revision != st.LastSuccess.Revision {
		t.Errorf("last success %+v, newest file %+v", st.LastSuccess, newest)
	}
	if !st.Files[0].Time.After(st.Files[1].Time) && st.Files[0].Revision <= st.Files[1].Revision {
		t.Errorf("files not newest first: %+v", st.Files)
	}
	if newest.Revision > lastRev || newest.Revision < 202 {
		t.Errorf("the newest snapshot's revision %d is not between the initial writes' (202) and the last write's (%d)", newest.Revision, lastRev)
	}
	want := Name(newest.Time, newest.Revision)
	if newest.Name != want || !strings.HasPrefix(newest.Name, "leasehold-") || !strings.HasSuffix(newest.Name, fmt.Sprintf("Z-r%d.db", newest.Revision)) {
		t.Errorf("name %q, want %q (leasehold-<UTC time>-r<revision>.db)", newest.Name, want)
	}
	files, err := List(context.Background(), dir, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Checked != "ok" {
			t.Errorf("%s does not check out again: %s", f.Name, f.Checked)
		}
	}
	// The newest restores, as "leasehold restore" does it, with every
	// write up to its revision.
	restored := filepath.Join(t.TempDir(), "restored.db")
	if err := boltdb.Restore(context.Background(), filepath.Join(dir, newest.Name), restored); err != nil {
		t.Fatalf("restore of %s: %v", newest.Name, err)
	}
	rs, err := boltdb.Open(context.Background(), restored, boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if rev, _ := rs.CurrentRevision(context.Background()); rev != newest.Revision {
		t.Errorf("the restored store is at revision %d, the snapshot's name says %d", rev, newest.Revision)
	}
	if _, err := rs.Get(context.Background(), "/registry/leases/default/l00199"); err != nil {
		t.Errorf("a record written before the first snapshot is missing from the restored store: %v", err)
	}
}

// TestScheduleStartsFromTheNewestSnapshot: a restart does not reset the
// schedule: the next snapshot is due an interval after the newest kept.
func TestScheduleStartsFromTheNewestSnapshot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := openStore(t, 1, 10)
	dir := t.TempDir()
	sched := New(Options{Flags: Flags{Interval: time.Hour, Retention: 3, Dir: dir}, Source: source(store), Logger: testLogger(t)})
	if run := sched.TakeOne(ctx); run.Result != clusterapi.SnapshotOK {
		t.Fatalf("TakeOne: %+v", run)
	}
	later := New(Options{Flags: Flags{Interval: time.Hour, Retention: 3, Dir: dir}, Source: source(store), Logger: testLogger(t), SettleDelay: time.Millisecond})
	go later.Run(ctx)
	var st clusterapi.Snapshots
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st = later.Status(ctx); st.Next != nil || time.Now().After(deadline) {
			break
		}
	}
	if st.Next == nil || st.Next.Sub(st.Files[0].Time) < 59*time.Minute {
		t.Errorf("next snapshot at %v, want an hour after the newest (%v)", st.Next, st.Files[0].Time)
	}
}
