package host

import (
	"context"
	"path/filepath"
	"testing"
)

// TestLoadedAfterFirstScan: Loaded stays open until the first scan of the
// directory is over, and the modules it found serve by then; without a
// directory it is closed from the start.
func TestLoadedAfterFirstScan(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "hello.wasm"), hello(t, "1"))
	h := quietHost(t, Options{Dir: dir})
	select {
	case <-h.Loaded():
		t.Fatal("Loaded closed before any scan")
	default:
	}
	h.Scan(context.Background())
	select {
	case <-h.Loaded():
	default:
		t.Fatal("Loaded still open after the first scan")
	}
	if v := version(t, h, "example.com/hello"); v != "1" {
		t.Errorf("module of the first scan: version %q", v)
	}

	none := quietHost(t, Options{})
	select {
	case <-none.Loaded():
	default:
		t.Error("Loaded open on a host without a directory")
	}
}
