package boltdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// storeWithWrites creates a store at path with n committed writes and
// closes it.
func storeWithWrites(t *testing.T, path string, n int) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, path, Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Create(ctx, fmt.Sprintf("/k/%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesDamagedFiles: every kind of damage that bbolt would turn
// into a silent reset, a silent loss or a crash is refused with ErrDamaged,
// naming the file and the remedy, and leaves the file as it was.
func TestOpenRefusesDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	storeWithWrites(t, good, 20)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := os.Getpagesize()
	zeroMeta0 := append([]byte(nil), data...)
	clear(zeroMeta0[:pageSize])
	for _, c := range []struct {
		name, want string
		content    []byte
	}{
		{"empty", "is empty (0 bytes)", nil},
		{"truncated-8k", "", data[:8<<10]},
		{"truncated-16k", "truncated", data[:16<<10]},
		{"zeroed-meta-0", "meta page 0", zeroMeta0},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".db")
			if err := os.WriteFile(path, c.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(context.Background(), path, Options{Logger: quietLogger})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "leasehold restore") {
				t.Errorf("error %q: want ErrDamaged naming the file, %q and the remedy", err, c.want)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, c.content) {
				t.Error("Open modified a file it refused")
			}
		})
	}

	// Accepting the fallback opens the file on the older meta page.
	path := filepath.Join(dir, "zeroed-meta-0.db")
	s, err := Open(context.Background(), path, Options{Logger: quietLogger, AcceptMetaFallback: true})
	if err != nil {
		t.Fatalf("with AcceptMetaFallback: %v", err)
	}
	defer s.Close()
	if rev, err := s.CurrentRevision(context.Background()); err != nil || rev < 20 {
		t.Errorf("revision %d (%v) after the fallback, want 20 or 21", rev, err)
	}
}
