package boltdb

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen: whatever bytes the database file holds, Open returns a store
// or an error; it never panics, faults or hangs the process.
func FuzzOpen(f *testing.F) {
	seed := filepath.Join(f.TempDir(), "seed.db")
	s, err := Open(context.Background(), seed, Options{Logger: quietLogger})
	if err != nil {
		f.Fatal(err)
	}
	for _, k := range []string{"/registry/leases/a", "/registry/leases/b"} {
		if _, err := s.Create(context.Background(), k, []byte("value")); err != nil {
			f.Fatal(err)
		}
	}
	s.Close()
	data, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{})
	f.Add(data[:4096])
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.db")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), path, Options{Logger: quietLogger, OpenTimeout: 1})
		if err == nil {
			s.Close()
		}
	})
}
