package run

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayFromBounded: --from refuses a file over the bound before
// reading it (a sparse file: no disk used), and never hands it on.
func TestReplayFromBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "history.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxHistoryFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	called := false
	replay := func(context.Context, string, []byte, string, string, io.Writer, io.Writer) int {
		called = true
		return 0
	}
	var stdout, stderr bytes.Buffer
	code := PluginReplayCommand(replay).Run(context.Background(), []string{"m.wasm", "--from", big}, &stdout, &stderr)
	if code != 1 || called || !strings.Contains(stderr.String(), "limit") {
		t.Fatalf("exit %d, replay called %v, stderr %q: want exit 1 naming the limit", code, called, stderr.String())
	}
}

// TestReplaySaveMode: the saved history is its owner's only, even over an
// existing world-readable file.
func TestReplaySaveMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := saveHistoryFile(path, []byte(`{"leases":[]}`)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); string(b) != `{"leases":[]}` {
		t.Fatalf("content %q", b)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".history.json.*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
