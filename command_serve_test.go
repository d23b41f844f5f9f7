package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
)

// TestListenRecorded: without --listen, serve listens where the data
// directory's record says the last start did; --listen or its environment
// twin wins over the record. A recorded non-loopback address that the
// flags given cannot serve safely is refused, naming the record.
func TestListenRecorded(t *testing.T) {
	dir := t.TempDir()
	parse := func(args ...string) (serveConfig, error) {
		return parseServeFlags(cli.NewFlagSet("serve", "", new(bytes.Buffer)), append([]string{"--data-dir", dir}, args...))
	}
	if cfg, err := parse(); err != nil || cfg.Listen != "127.0.0.1:8080" || cfg.ListenFromRecord {
		t.Fatalf("no record: listen %q (from record %t), %v; want the default", cfg.Listen, cfg.ListenFromRecord, err)
	}
	if err := datadir.At(dir).SaveAddresses(datadir.Addresses{Listen: "127.0.0.1:8081"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := parse(); err != nil || cfg.Listen != "127.0.0.1:8081" || !cfg.ListenFromRecord {
		t.Errorf("data directory alone: listen %q (from record %t), %v; want the recorded 127.0.0.1:8081", cfg.Listen, cfg.ListenFromRecord, err)
	}
	if cfg, err := parse("--listen", "127.0.0.1:9090"); err != nil || cfg.Listen != "127.0.0.1:9090" || cfg.ListenRecorded != "127.0.0.1:8081" {
		t.Errorf("--listen given: listen %q (recorded %q), %v; want the flag", cfg.Listen, cfg.ListenRecorded, err)
	}
	t.Setenv("LEASEHOLD_LISTEN", "127.0.0.1:9191")
	if cfg, err := parse(); err != nil || cfg.Listen != "127.0.0.1:9191" {
		t.Errorf("LEASEHOLD_LISTEN given: listen %q, %v; want the environment's", cfg.Listen, err)
	}
	os.Unsetenv("LEASEHOLD_LISTEN")
	if err := datadir.At(dir).SaveAddresses(datadir.Addresses{Listen: "0.0.0.0:6443"}); err != nil {
		t.Fatal(err)
	}
	if _, err := parse(); err == nil || !strings.Contains(err.Error(), "addresses.json") {
		t.Errorf("a recorded network address without authentication: %v, want a refusal naming the record", err)
	}
}
