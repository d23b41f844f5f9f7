package boltdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOfflineBackupRestoreCompact(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "leasehold.db")
	var commits int
	s, err := Open(ctx, path, Options{OnCommit: func(d time.Duration, writes int, err error) {
		if err == nil && writes > 0 && d > 0 {
			commits++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 4096)
	for i := range 200 {
		if _, err := s.Create(ctx, fmt.Sprintf("/k/%03d", i), big); err != nil {
			t.Fatal(err)
		}
	}
	if commits == 0 {
		t.Fatal("OnCommit was never called")
	}
	// A running store holds the lock: every offline operation refuses.
	if _, err := BackupFile(ctx, path, &bytes.Buffer{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("BackupFile on an open store: %v, want ErrLocked", err)
	}
	if _, _, err := CompactFile(ctx, path); !errors.Is(err, ErrLocked) {
		t.Fatalf("CompactFile on an open store: %v, want ErrLocked", err)
	}
	var online bytes.Buffer
	if _, err := s.Backup(ctx, &online); err != nil {
		t.Fatal(err)
	}
	for i := range 190 {
		if _, _, err := s.Delete(ctx, fmt.Sprintf("/k/%03d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var offline bytes.Buffer
	if _, err := BackupFile(ctx, path, &offline); err != nil {
		t.Fatal(err)
	}
	before, after, err := CompactFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if after >= before {
		t.Errorf("compaction did not shrink the file: %d -> %d bytes", before, after)
	}
	if got := keysIn(t, path); got != 10 {
		t.Errorf("after compaction: %d keys, want 10", got)
	}

	// Restore the online copy (200 keys) over the live file.
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(backup, online.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, backup, path); err != nil {
		t.Fatal(err)
	}
	if got := keysIn(t, path); got != 200 {
		t.Errorf("after restore: %d keys, want 200", got)
	}
	if _, err := os.Stat(path + ".pre-restore"); err != nil {
		t.Errorf("the replaced file was not kept: %v", err)
	}

	// A file that is not a store is refused and nothing changes.
	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte{7}, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, junk, path); !errors.Is(err, ErrFormat) {
		t.Fatalf("restore of junk: %v, want ErrFormat", err)
	}
	if got := keysIn(t, path); got != 200 {
		t.Errorf("after a refused restore: %d keys, want 200", got)
	}
}

func keysIn(t *testing.T, path string) int64 {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Keys
}
