package host

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestFlagsTrustKeys: --plugin-trust-keys takes a comma-separated list of
// files; --plugins-dir defaults to the directory Resolve is given.
func TestFlagsTrustKeys(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.RegisterFlags(fs)
	if err := fs.Parse([]string{"--plugin-trust-keys", "a.pub, b.pub,,"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Resolve("/data/plugins"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.TrustKeys, "|"); got != "a.pub|b.pub" {
		t.Errorf("TrustKeys = %q, want a.pub|b.pub", got)
	}
	if f.Dir != "/data/plugins" {
		t.Errorf("Dir = %q, want the default /data/plugins", f.Dir)
	}
}

// TestFlagsTimeout: a decision deadline must be positive.
func TestFlagsTimeout(t *testing.T) {
	f := Flags{Timeout: 0}
	if err := f.Resolve("d"); err == nil || !strings.Contains(err.Error(), "--plugin-timeout") {
		t.Errorf("Resolve with --plugin-timeout 0: %v, want an error naming the flag", err)
	}
}
