package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// TestE2EScheduledSnapshotsSingleDevice: a single device on a one-second
// schedule writes checked snapshots into <data-dir>/snapshots, keeps the
// newest three, lists them through the server, and "leasehold restore"
// of one, on another data directory, serves the lease written before it.
func TestE2EScheduledSnapshotsSingleDevice(t *testing.T) {
	testneeds.Slow(t, "runs a server on a snapshot schedule and restores one")
	t.Parallel()
	ts := startServer(t, "--snapshot-interval", "1s", "--snapshot-retention", "3", "--snapshot-min-free-bytes", "1048576")
	createLease(t, ts.URL, "default", "keep-me", "device-1")
	written := time.Now()
	dir := filepath.Join(ts.DataDir, "snapshots")
	var data []byte
	var newest string
	eventually(t, 60*time.Second, "three snapshots, the newest started after the lease was written", func() (bool, string) {
		entries, _ := os.ReadDir(dir)
		if len(entries) != 3 {
			return false, strings.Join(entryNames(entries), " ")
		}
		newest = entries[2].Name()
		info, err := entries[2].Info()
		if err != nil || !info.ModTime().After(written.Add(time.Second)) {
			return false, strings.Join(entryNames(entries), " ")
		}
		data, err = os.ReadFile(filepath.Join(dir, newest))
		return err == nil, strings.Join(entryNames(entries), " ")
	})
	code, out, errOut := runCLI(t, "backup", "list", "--kubeconfig", ts.Kubeconfig)
	if code != 0 || !strings.Contains(out, "schedule: every 1s, the newest 3 kept") || strings.Count(out, "leasehold-") < 3 {
		t.Errorf("backup list --kubeconfig: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	snap := filepath.Join(t.TempDir(), newest)
	if err := os.WriteFile(snap, data, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := t.TempDir()
	if code, out, errOut := runCLI(t, "restore", "--data-dir", restored, snap); code != 0 {
		t.Fatalf("restore %s = %d %s %s", newest, code, out, errOut)
	}
	ts2 := startServerIn(t, restored, "--snapshot-interval", "0")
	code, _, body := httpGet(t, ts2.URL+"/apis/coordination.k8s.io/v1/namespaces/default/leases/keep-me")
	if code != 200 || !strings.Contains(body, `"holderIdentity":"device-1"`) {
		t.Errorf("the lease restored from %s = %d %s", newest, code, body)
	}
}

func entryNames(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
