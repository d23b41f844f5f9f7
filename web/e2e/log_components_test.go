package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2ELogOneComponent: a single-device server that elects a
// coordinated lease, serves a watch and shuts down labels every line it
// logs with exactly one component (the election controller's lines once
// said component=election twice).
func TestE2ELogOneComponent(t *testing.T) {
	t.Parallel() // waits on real lease durations, no CPU-bound check
	dir := t.TempDir()
	e := newRunEnv(t, dir)
	ts := startServer(t, "--log-level", "debug")
	file := filepath.Join(dir, "records")
	p := e.start(t, "c1", file, []string{"--server", ts.URL, "--lease", "labelled", "--candidate", "--binary-version", "1.37.0"})
	waitRecord(t, file, 20*time.Second, "the granted child", func(r record) bool { return r.kind == "start" })
	p.signal(t, syscall.SIGTERM)
	p.wait(t, 10*time.Second)
	ts.Stop(t)
	log := ts.Log()
	if !strings.Contains(log, "component=election") {
		t.Fatalf("the server logged nothing of the election:\n%s", log)
	}
	checkLabelledLog(t, "the server", log)
}
