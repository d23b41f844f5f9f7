package web

import (
	"os"
	"os/exec"
	"path/filepath"
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

func TestExeLayout(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := exeLayout(self); !ok {
		t.Fatalf("the test binary %s was not read as ELF", self)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok := exeLayout(notELF); ok {
		t.Fatal("a shell script was read as ELF")
	}
	// A position-independent build may hold relocated read-only data:
	// only its code may be released.
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pie := filepath.Join(dir, "pie")
	cmd := exec.Command("go", "build", "-buildmode=pie", "-o", pie, src)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=pie: %v\n%s", err, out)
	}
	if codeOnly, ok := exeLayout(pie); !ok || !codeOnly {
		t.Fatalf("PIE binary: codeOnly %v, ok %v; want code only", codeOnly, ok)
	}
}
