package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// statusKB reads one "kB" line (RssAnon, RssFile, ...) of a process's
// /proc/<pid>/status.
func statusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestE2EIdleServerReleasesMemory checks what the footprint figure in the
// README relies on: a server that stops getting requests returns its free
// heap and unmaps its executable's start-up pages within a few seconds,
// and answers the next request as before.
func TestE2EIdleServerReleasesMemory(t *testing.T) {
	ts := startServer(t)
	for i := range 200 {
		createLease(t, ts.URL, "default", fmt.Sprintf("idle-%03d", i), "holder")
	}
	get := func(path string) {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
	}
	get("/apis/coordination.k8s.io/v1/leases")
	busyFile := statusKB(t, ts.Pid(), "RssFile")
	// The idle check runs every 3 s and needs one full quiet interval.
	eventually(t, 15*time.Second, "idle memory release", func() (bool, string) {
		f := statusKB(t, ts.Pid(), "RssFile")
		return f < busyFile/2, fmt.Sprintf("RssFile %d kB, %d kB while busy", f, busyFile)
	})
	t.Logf("RssFile %d kB busy, %d kB idle; RssAnon %d kB idle", busyFile, statusKB(t, ts.Pid(), "RssFile"), statusKB(t, ts.Pid(), "RssAnon"))
	// Dropped pages come back on use.
	get("/apis/coordination.k8s.io/v1/namespaces/default/leases/idle-007")
	get("/apis/coordination.k8s.io/v1/leases?limit=50")
	createLease(t, ts.URL, "default", "after-idle", "holder")
}
