package boltdb

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/leasehold/leasehold/storage"
)

func TestValueTooLarge(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{MaxValueBytes: 10})
	if _, err := s.Create(ctx, "/k", make([]byte, 11)); !errors.Is(err, storage.ErrValueTooLarge) {
		t.Fatalf("Create 11 bytes: %v", err)
	}
	kv, err := s.Create(ctx, "/k", make([]byte, 10))
	if err != nil {
		t.Fatalf("Create 10 bytes: %v", err)
	}
	if _, err := s.Update(ctx, "/k", make([]byte, 11), kv.ModRevision); !errors.Is(err, storage.ErrValueTooLarge) {
		t.Fatalf("Update 11 bytes: %v", err)
	}
	if rev, _ := s.CurrentRevision(ctx); rev != kv.ModRevision {
		t.Fatalf("rejected write moved the revision to %d", rev)
	}
	// The default is etcd's 1.5 MiB.
	if got := (Options{}).withDefaults().MaxValueBytes; got != 1536*1024 {
		t.Fatalf("default MaxValueBytes %d", got)
	}
}

func TestHistoryRetention(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{HistoryMaxEvents: 3})
	var last storage.KeyValue
	for i := range 6 {
		kv, err := s.Create(ctx, "/k"+string(rune('a'+i)), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		last = kv
	}
	crev, _ := s.CompactRevision(ctx)
	if crev != last.ModRevision-3 {
		t.Fatalf("compact revision %d with 3 retained events and current %d", crev, last.ModRevision)
	}
	if _, err := s.List(ctx, "/", storage.ListOptions{Revision: crev - 1}); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("List below the window: %v", err)
	}
	res, err := s.List(ctx, "/", storage.ListOptions{Revision: crev})
	if err != nil || res.Count != 3 {
		t.Fatalf("List at the window edge: %d keys, %v", res.Count, err)
	}

	// The time window trims too.
	s2, _ := openTemp(t, Options{HistoryWindow: time.Millisecond})
	a, _ := s2.Create(ctx, "/a", nil)
	time.Sleep(5 * time.Millisecond)
	b, _ := s2.Create(ctx, "/b", nil)
	if crev, _ := s2.CompactRevision(ctx); crev < a.ModRevision {
		t.Fatalf("compact revision %d: event at %d outlived the window (now %d)", crev, a.ModRevision, b.ModRevision)
	}
}

func TestHistoryByteBound(t *testing.T) {
	ctx := context.Background()
	value := bytes.Repeat([]byte("x"), 1000)
	// Room for about ten events of a 1,000-byte value.
	s, _ := openTemp(t, Options{HistoryMaxBytes: 10 * eventBytes(&storage.Event{KV: storage.KeyValue{Key: "/k", Value: value}, PrevKV: &storage.KeyValue{}})})
	kv, err := s.Create(ctx, "/k", value)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if kv, err = s.Update(ctx, "/k", value, kv.ModRevision); err != nil {
			t.Fatal(err)
		}
	}
	crev, _ := s.CompactRevision(ctx)
	if kept := kv.ModRevision - crev; kept < 9 || kept > 10 {
		t.Fatalf("%d events kept (compact %d, current %d), want 9-10", kept, crev, kv.ModRevision)
	}
	held, limit := s.snap.Load().hist.bytes, s.opts.HistoryMaxBytes
	if held > limit || held <= 0 {
		t.Fatalf("history holds %d bytes, limit %d", held, limit)
	}
	// A watch from the oldest retained revision replays every kept event.
	w, err := s.Watch(ctx, "/", crev+1)
	if err != nil {
		t.Fatalf("Watch at the window edge: %v", err)
	}
	w.Stop()
	if _, err := s.List(ctx, "/", storage.ListOptions{Revision: crev - 1}); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("List below the byte-bounded window: %v", err)
	}
	if got := (Options{}).withDefaults().HistoryMaxBytes; got != DefaultHistoryMaxBytes {
		t.Fatalf("default HistoryMaxBytes %d", got)
	}
}

func TestHistoryExpiresWithoutWrites(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{HistoryWindow: 100 * time.Millisecond})
	var last storage.KeyValue
	for i := range 3 {
		kv, err := s.Create(ctx, "/k"+string(rune('a'+i)), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		last = kv
	}
	// No further write: the store's own ticker (every second at the
	// least) must still apply the window.
	deadline := time.Now().Add(5 * time.Second)
	for {
		crev, _ := s.CompactRevision(ctx)
		if crev == last.ModRevision {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compact revision %d, current %d: an idle store kept expired history", crev, last.ModRevision)
		}
		time.Sleep(50 * time.Millisecond)
	}
	held := s.snap.Load().hist.bytes
	if held != 0 {
		t.Fatalf("empty history still accounts %d bytes", held)
	}
	// The store keeps working, and ReleaseMemory is harmless.
	s.ReleaseMemory()
	if _, err := s.Create(ctx, "/after", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if kv, err := s.Get(ctx, "/ka"); err != nil || string(kv.Value) != "v" {
		t.Fatalf("Get after release: %q %v", kv.Value, err)
	}
}

func TestBackupIsOpenableCopy(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, Options{})
	kv, err := s.Create(ctx, "/k", []byte("backed up"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := s.Backup(ctx, &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup: %d bytes (buffer %d), %v", n, buf.Len(), err)
	}
	// Writes after the backup are not in it.
	if _, err := s.Create(ctx, "/later", nil); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(filepath.Dir(path), "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, copyPath, Options{Logger: quietLogger})
	if err != nil {
		t.Fatalf("open backup: %v", err)
	}
	defer c.Close()
	got, err := c.Get(ctx, "/k")
	if err != nil || string(got.Value) != "backed up" || got.ModRevision != kv.ModRevision {
		t.Fatalf("backup /k = %+v, %v", got, err)
	}
	if _, err := c.Get(ctx, "/later"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("backup contains a later write: %v", err)
	}
	if rev, _ := c.CurrentRevision(ctx); rev != kv.ModRevision {
		t.Fatalf("backup revision %d, want %d", rev, kv.ModRevision)
	}
}

func TestStats(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	for _, k := range []string{"/a", "/b"} {
		if _, err := s.Create(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Backend != "boltdb" || st.Keys != 2 || st.Revision != 3 || st.CompactRevision != 1 || st.SizeBytes <= 0 {
		t.Fatalf("Stats = %+v", st)
	}
	s.Close()
	if _, err := s.Stats(ctx); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Stats after Close: %v", err)
	}
}

// TestFailedCommitLeavesMemoryUntouched breaks the bbolt handle under the
// store: the round must fail as a whole and nothing may become visible.
func TestFailedCommitLeavesMemoryUntouched(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	kv, err := s.Create(ctx, "/k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(ctx, "/k", []byte("v2"), kv.ModRevision)
	if !errors.Is(err, bolt.ErrDatabaseNotOpen) || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("Update on a broken file: %v", err)
	}
	got, _ := s.Get(ctx, "/k")
	rev, _ := s.CurrentRevision(ctx)
	if string(got.Value) != "v1" || rev != kv.ModRevision {
		t.Fatalf("failed commit leaked: /k=%q revision %d", got.Value, rev)
	}
	select {
	case resp := <-w.ResultChan():
		t.Fatalf("watcher saw an uncommitted round: %+v", resp)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestWatchFutureRevision: a watch may start above the current revision;
// it then sees only events after that revision.
func TestWatchFutureRevision(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	rev, _ := s.CurrentRevision(ctx)
	w, err := s.Watch(ctx, "/", rev+2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, k := range []string{"/a", "/b", "/c"} {
		if _, err := s.Create(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case resp := <-w.ResultChan():
		if len(resp.Events) != 1 || resp.Events[0].KV.Key != "/c" || resp.Events[0].Revision() != rev+3 {
			t.Fatalf("future watch got %+v", resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
}

// TestCommitDelayGroupsWrites: with a commit window longer than the test,
// writes wait for each other until the round is full, and the full round is
// one bbolt transaction, so the bytes written per write shrink by the round
// size. Nothing here depends on timing: the window never ends first.
func TestCommitDelayGroupsWrites(t *testing.T) {
	ctx := context.Background()
	const n = 8
	s, path := openTemp(t, Options{CommitDelay: time.Hour, MaxBatch: n})
	before := s.commits.Load()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.Create(ctx, "/group/k"+string(rune('a'+i)), []byte("v"))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Create in a delayed round: %v", err)
		}
	}
	if got := s.commits.Load() - before; got != 1 {
		t.Fatalf("%d writes in a round of %d took %d commits, want 1", n, n, got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Answered means synced: the round is on disk.
	s2, err := Open(ctx, path, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	res, err := s2.List(ctx, "/group/", storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.KVs) != n {
		t.Fatalf("after reopening, %d of the %d acknowledged writes are stored", len(res.KVs), n)
	}
}
