package boltdb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/leasehold/leasehold/storage"
)

// TestWriteFailureAndRecovery makes the database file unwritable under a
// running store - its descriptor is swapped for a read-only one, as when
// the filesystem turns read-only or the device fails - and checks that
// writes fail with the OS error while reads go on, and that once the file
// is writable again writes succeed without reopening and the file is
// consistent. (The disk-full variant, ENOSPC on a real filesystem, is the
// root package's TestE2EDiskFull.)
func TestWriteFailureAndRecovery(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(ctx, path, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kv, err := s.Create(ctx, "/k/a", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}

	fd := openFD(t, path)
	saved, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(saved)
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(ro.Fd()), fd, 0); err != nil {
		t.Fatal(err)
	}
	ro.Close()

	_, err = s.Update(ctx, "/k/a", []byte("v2"), kv.ModRevision)
	if !errors.Is(err, syscall.EBADF) {
		t.Fatalf("update of an unwritable file: %v, want the OS error (EBADF)", err)
	}
	if _, err := s.Create(ctx, "/k/b", []byte("x")); err == nil {
		t.Fatal("create of an unwritable file succeeded")
	}
	if got, err := s.Get(ctx, "/k/a"); err != nil || string(got.Value) != "v1" || got.ModRevision != kv.ModRevision {
		t.Fatalf("read while unwritable: %+v, %v; want the last committed v1", got, err)
	}
	if l, err := s.List(ctx, "/k/", storage.ListOptions{}); err != nil || len(l.KVs) != 1 {
		t.Fatalf("list while unwritable: %+v, %v", l, err)
	}

	if err := syscall.Dup3(saved, fd, 0); err != nil {
		t.Fatal(err)
	}
	kv2, err := s.Update(ctx, "/k/a", []byte("v2"), kv.ModRevision)
	if err != nil {
		t.Fatalf("update after the file is writable again: %v", err)
	}
	if _, err := s.Create(ctx, "/k/b", []byte("x")); err != nil {
		t.Fatalf("create after recovery: %v", err)
	}
	if err := s.Verify(ctx); err != nil {
		t.Fatalf("integrity after recovery: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got, err := s2.Get(ctx, "/k/a"); err != nil || string(got.Value) != "v2" || got.ModRevision != kv2.ModRevision {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}

// openFD finds the descriptor this process holds on path (bbolt does not
// expose its file).
func openFD(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			fd, err := strconv.Atoi(e.Name())
			if err == nil {
				return fd
			}
		}
	}
	t.Fatalf("no open descriptor on %s", path)
	return -1
}
