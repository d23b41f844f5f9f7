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

// TestFlagsSequencePins: --plugin-min-sequence and --plugin-allow-rollback
// are parsed into Pins, and refused without --plugin-trust-keys (they
// would pin nothing).
func TestFlagsSequencePins(t *testing.T) {
	parse := func(args ...string) (Flags, error) {
		var f Flags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f, f.Resolve("d")
	}
	f, err := parse("--plugin-trust-keys", "k.pub", "--plugin-min-sequence", "100,example.com/a=200", "--plugin-allow-rollback", "example.com/b")
	if err != nil {
		t.Fatal(err)
	}
	if f.Pins.Min != 100 || f.Pins.MinByStrategy["example.com/a"] != 200 || strings.Join(f.Pins.AllowRollback, ",") != "example.com/b" {
		t.Errorf("Pins = %+v", f.Pins)
	}
	if _, err := parse("--plugin-trust-keys", "k.pub", "--plugin-min-sequence", "soon"); err == nil || !strings.Contains(err.Error(), "--plugin-min-sequence") {
		t.Errorf("a malformed minimum: %v", err)
	}
	if _, err := parse("--plugin-min-sequence", "100"); err == nil || !strings.Contains(err.Error(), "--plugin-trust-keys") {
		t.Errorf("a minimum without trust keys: %v", err)
	}
}
