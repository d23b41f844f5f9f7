package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/cli"
)

// TestServeRefusesAStagedSnapshot: a data directory holding a snapshot
// that "leasehold restore" staged starts only with --cluster-init; serving
// a fresh single-device database beside it, or joining another cluster,
// would leave the restore undone without a word.
func TestServeRefusesAStagedSnapshot(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "cluster"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster", "restore.snapshot"), []byte("staged"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	_, err := parseServeFlags(cli.NewFlagSet("serve", "", &stderr), []string{"--data-dir", dir})
	if err == nil || !strings.Contains(err.Error(), "--cluster-init") {
		t.Errorf("serve without cluster flags beside a staged snapshot: %v, want a refusal naming --cluster-init", err)
	}
	if _, err := parseServeFlags(cli.NewFlagSet("serve", "", &stderr), []string{"--data-dir", dir, "--cluster-init", "--cluster-token", "t"}); err != nil {
		t.Errorf("serve --cluster-init beside a staged snapshot: %v", err)
	}
}
