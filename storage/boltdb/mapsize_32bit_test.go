//go:build 386 || arm

package boltdb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLargeFileRefusedOn32Bit: a database over 2 GiB (here sparse) is
// refused at open with a message naming the limit and the remedy, and the
// file is left as it was. It runs on 32-bit builds only (.ci/arm-test
// runs it on armv7 under qemu).
func TestLargeFileRefusedOn32Bit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leasehold.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const size = 3 << 30
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "more than a 32-bit build can map") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want a refusal naming the file and the 32-bit limit", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Fatalf("file changed: %v %v", fi.Size(), err)
	}
}
