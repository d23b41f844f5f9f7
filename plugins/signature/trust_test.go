package signature

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadTrust: without trusted keys a server exposed beyond loopback
// warns that modules are not verified; on loopback it does not; with keys
// it logs the trusted key ids, and an unreadable trust file stops the
// start.
func TestLoadTrust(t *testing.T) {
	logged := func(files []string, exposed bool) (string, error) {
		var buf bytes.Buffer
		_, err := LoadTrust(files, "p", exposed, "0.0.0.0:8080", slog.New(slog.NewTextHandler(&buf, nil)))
		return buf.String(), err
	}
	const warning = "Strategy modules are not verified"
	for _, exposed := range []bool{true, false} {
		out, err := logged(nil, exposed)
		if err != nil || strings.Contains(out, warning) != exposed {
			t.Errorf("exposed %v: warned %v, err %v: %s", exposed, !exposed, err, out)
		}
	}

	dir := t.TempDir()
	id, err := GenerateKey(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := logged([]string{filepath.Join(dir, "k.pub")}, true)
	if err != nil || strings.Contains(out, warning) || !strings.Contains(out, id) {
		t.Errorf("with trust keys: err %v, log %s", err, out)
	}
	if _, err := logged([]string{filepath.Join(dir, "missing.pub")}, false); err == nil {
		t.Error("a missing trust file did not stop the start")
	}
}
