package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readVersion(t *testing.T, l Layout) string {
	t.Helper()
	data, err := os.ReadFile(l.VersionFile())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestOpenNewAndToday: a new directory is created at the current version;
// one written before the version file existed (a database, no version) is
// version 1, today's layout, and gets the file on its first open, its
// files untouched.
func TestOpenNewAndToday(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "new")
	l, err := Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got := readVersion(t, l); got != "1\n" {
		t.Errorf("new directory: version file %q, want \"1\\n\"", got)
	}

	old := t.TempDir()
	if err := os.WriteFile(At(old).Database(), []byte("db"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, v, err := Inspect(old); err != nil || v != 1 {
		t.Fatalf("Inspect of a directory without a version file: version %d, err %v; want 1", v, err)
	}
	if _, err := os.Stat(At(old).VersionFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Inspect wrote the version file (%v); it must only read", err)
	}
	if l, err = Open(old); err != nil {
		t.Fatal(err)
	}
	if got := readVersion(t, l); got != "1\n" {
		t.Errorf("today's directory: version file %q after Open", got)
	}
	if data, _ := os.ReadFile(l.Database()); string(data) != "db" {
		t.Errorf("Open changed the database: %q", data)
	}
}

// TestOpenRefusesNewer: a directory a newer leasehold wrote is refused by
// both Open and Inspect, with ErrNewer and both versions named, and left as
// it is.
func TestOpenRefusesNewer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(At(dir).VersionFile(), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir)
	if !errors.Is(err, ErrNewer) || !strings.Contains(err.Error(), "version 7") || !strings.Contains(err.Error(), "up to version 1") {
		t.Errorf("Open of a version-7 directory: %v", err)
	}
	if _, _, err := Inspect(dir); !errors.Is(err, ErrNewer) {
		t.Errorf("Inspect of a version-7 directory: %v", err)
	}
	if got := readVersion(t, At(dir)); got != "7\n" {
		t.Errorf("the refused directory's version file is now %q", got)
	}
	if err := os.WriteFile(At(dir).VersionFile(), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a layout version") {
		t.Errorf("Open with a garbled version file: %v", err)
	}
}

// TestOpenMigrates runs the migration hook as a future layout change
// would: a version-1 directory opened by a binary of version 3 runs both
// steps in order, recording each; a failing step stops at the version
// reached, and the next open resumes there.
func TestOpenMigrates(t *testing.T) {
	dir := t.TempDir()
	l := At(dir)
	if err := os.WriteFile(l.Database(), []byte("db"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ran []string
	fail := true
	steps := []Migration{
		func(l Layout) error { // 1 -> 2: the database moves into db/
			ran = append(ran, "1->2")
			if err := os.MkdirAll(filepath.Join(l.Dir, "db"), 0o700); err != nil {
				return err
			}
			return os.Rename(l.Database(), filepath.Join(l.Dir, "db", "leasehold.db"))
		},
		func(l Layout) error { // 2 -> 3
			ran = append(ran, "2->3")
			if fail {
				return errors.New("disk full")
			}
			return nil
		},
	}
	if _, err := open(dir, 3, steps); err == nil || !strings.Contains(err.Error(), "migrate layout version 2 to 3: disk full") {
		t.Fatalf("failing second step: %v", err)
	}
	if got := readVersion(t, l); got != "2\n" {
		t.Errorf("after the failed step the version file says %q, want 2", got)
	}
	fail = false
	if _, err := open(dir, 3, steps); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ran, " "); got != "1->2 2->3 2->3" {
		t.Errorf("steps ran %q, want the first once and the second twice", got)
	}
	if got := readVersion(t, l); got != "3\n" {
		t.Errorf("version file %q, want 3", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "db", "leasehold.db")); err != nil {
		t.Errorf("the first step's move: %v", err)
	}
	if _, err := open(dir, 4, steps); err == nil || !strings.Contains(err.Error(), "no migration from layout version 3 to 4") {
		t.Errorf("a missing step: %v", err)
	}
}
