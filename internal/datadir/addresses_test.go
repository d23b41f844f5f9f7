package datadir

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddresses: a directory without the record has none; a saved record
// reads back, replaces the previous one whole and leaves no temporary
// file; a damaged record is an error that names the file.
func TestAddresses(t *testing.T) {
	l := At(t.TempDir())
	if a, err := l.LoadAddresses(); err != nil || a != (Addresses{}) {
		t.Fatalf("no record: %+v, %v; want the zero Addresses", a, err)
	}
	for _, listen := range []string{"127.0.0.1:8081", "0.0.0.0:6443"} {
		if err := l.SaveAddresses(Addresses{Listen: listen}); err != nil {
			t.Fatal(err)
		}
		if a, err := l.LoadAddresses(); err != nil || a.Listen != listen {
			t.Fatalf("after saving %s: %+v, %v", listen, a, err)
		}
	}
	entries, err := os.ReadDir(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != filepath.Base(l.AddressesFile()) {
		t.Errorf("the directory holds %v, want the record alone", entries)
	}
	if err := os.WriteFile(l.AddressesFile(), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.LoadAddresses(); err == nil || !strings.Contains(err.Error(), l.AddressesFile()) {
		t.Errorf("a damaged record: err %v, want one naming %s", err, l.AddressesFile())
	}
}

// TestResolveListen: without --listen given, the recorded address wins
// over the default; given, the flag wins; RecordListen records the
// address served at, and a restart then resolves to it.
func TestResolveListen(t *testing.T) {
	l := At(t.TempDir())
	if addr, rec, from, err := l.ResolveListen("127.0.0.1:8080", false); err != nil || addr != "127.0.0.1:8080" || rec != "" || from {
		t.Fatalf("no record: %q (recorded %q, from record %t), %v; want the default", addr, rec, from, err)
	}
	if err := l.RecordListen("127.0.0.1:8081", "", slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if addr, rec, from, err := l.ResolveListen("127.0.0.1:8080", false); err != nil || addr != "127.0.0.1:8081" || rec != "127.0.0.1:8081" || !from {
		t.Errorf("restart without --listen: %q (recorded %q, from record %t), %v; want the recorded 127.0.0.1:8081", addr, rec, from, err)
	}
	if addr, rec, from, err := l.ResolveListen("127.0.0.1:9090", true); err != nil || addr != "127.0.0.1:9090" || rec != "127.0.0.1:8081" || from {
		t.Errorf("--listen given: %q (recorded %q, from record %t), %v; want the flag", addr, rec, from, err)
	}
}
