package election

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestFlags: --election-first-grant-wait defaults to DefaultFirstGrantWait,
// its 0 ("no wait") is Options' negative, and a negative wait is refused.
func TestFlags(t *testing.T) {
	parse := func(args ...string) (Flags, error) {
		var f Flags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f, f.Validate()
	}
	if f, err := parse(); err != nil || f.FirstGrantWait != DefaultFirstGrantWait {
		t.Errorf("default: %s, %v; want %s", f.FirstGrantWait, err, DefaultFirstGrantWait)
	}
	if f, err := parse("--election-first-grant-wait", "0"); err != nil || f.FirstGrantWait >= 0 {
		t.Errorf("0: %s, %v; want a negative wait (none)", f.FirstGrantWait, err)
	}
	if _, err := parse("--election-first-grant-wait", "-1s"); err == nil || !strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("-1s: %v, want must not be negative", err)
	}
}
