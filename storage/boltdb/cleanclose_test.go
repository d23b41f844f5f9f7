package boltdb

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// logBuffer collects a store's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// openChecked opens the store at path and returns how Open checked the
// file, from its "storage opened" log line.
func openChecked(t *testing.T, path string) (*Store, string) {
	t.Helper()
	var logs logBuffer
	s, err := Open(context.Background(), path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if _, check, ok := strings.Cut(line, "fileCheck="); ok && strings.Contains(line, "storage opened") {
			return s, strings.Trim(check, `"`)
		}
	}
	s.Close()
	t.Fatalf("no fileCheck in the open log:\n%s", logs.String())
	return nil, ""
}

func markerExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(cleanMarkerPath(path))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestCleanCloseSkipsPageWalk: after a clean close the next Open skips
// the page walk, removes the marker before anything can write, and the
// data is all there; the next Close writes the marker again.
func TestCleanCloseSkipsPageWalk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clean.db")
	storeWithWrites(t, path, 50)
	if !markerExists(t, path) {
		t.Fatal("Close left no clean-close marker")
	}
	s, check := openChecked(t, path)
	if check != "skipped after a clean close" {
		t.Errorf("Open after a clean close: fileCheck %q, want the walk skipped", check)
	}
	if markerExists(t, path) {
		t.Error("the marker is still there while the store is open: a crash now would skip the walk")
	}
	if kv, err := s.Get(context.Background(), "/k/49"); err != nil || string(kv.Value) != "v" {
		t.Errorf("Get after the skipped walk: %v, %v", kv, err)
	}
	if _, err := s.Create(context.Background(), "/k/new", []byte("w")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !markerExists(t, path) {
		t.Fatal("the second Close left no marker")
	}
	s, check = openChecked(t, path)
	defer s.Close()
	if check != "skipped after a clean close" {
		t.Errorf("second reopen: fileCheck %q", check)
	}
	if kv, err := s.Get(context.Background(), "/k/new"); err != nil || string(kv.Value) != "w" {
		t.Errorf("Get of the write before the second close: %v, %v", kv, err)
	}
}

// TestCleanCloseFileChangedIsWalked: a file changed after its clean close
// (here a page of its tree damaged in place, as by a bad copy or the
// disk) no longer matches the marker, so Open walks the pages and refuses
// it; a marker of another format is ignored the same way.
func TestCleanCloseFileChangedIsWalked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "damaged.db")
	storeWithWrites(t, path, 50)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseBoltMeta(data)
	if err != nil {
		t.Fatal(err)
	}
	if m1, err := parseBoltMeta(data[m.pageSize:]); err == nil && m1.txid > m.txid {
		m = m1
	}
	// The root bucket's page claims to be another page.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xEE, 0xEE, 0, 0, 0, 0, 0, 0}, int64(m.root)*int64(m.pageSize)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !markerExists(t, path) {
		t.Fatal("Close left no clean-close marker")
	}
	s, err := Open(context.Background(), path, Options{Logger: quietLogger})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a file damaged after its clean close: the marker made it skip the page walk")
	}
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "says it is page") {
		t.Errorf("error %q: want ErrDamaged from the page walk", err)
	}

	other := filepath.Join(dir, "other.db")
	storeWithWrites(t, other, 5)
	if err := os.WriteFile(cleanMarkerPath(other), []byte("something else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, check := openChecked(t, other)
	defer s.Close()
	if check != "pages walked" {
		t.Errorf("with a foreign marker: fileCheck %q, want the pages walked", check)
	}
}
