package web

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKB reads this process's file-backed resident memory.
func rssFileKB(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseExecutablePages(t *testing.T) {
	before := rssFileKB(t)
	releaseExecutablePages()
	after := rssFileKB(t)
	t.Logf("RssFile %d kB -> %d kB", before, after)
	if after >= before {
		t.Fatalf("RssFile did not shrink: %d kB -> %d kB", before, after)
	}
	// The code runs on after its pages were dropped (they fault back in),
	// and a second release is harmless.
	releaseExecutablePages()
	if again := rssFileKB(t); again >= before {
		t.Fatalf("RssFile after a second release %d kB, before the first %d kB", again, before)
	}
}
