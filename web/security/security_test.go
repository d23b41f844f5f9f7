package security

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestAllowedHosts: --allowed-hosts is a comma-separated list (blanks
// dropped), and the --listen host is always allowed besides.
func TestAllowedHosts(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := RegisterFlags(fs)
	if err := fs.Parse([]string{"--allowed-hosts", "leases.example, .example.com,,"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.AllowedHosts("device.local:8080"), "|"); got != "leases.example|.example.com|device.local" {
		t.Errorf("AllowedHosts = %q, want leases.example|.example.com|device.local", got)
	}
	if got := c.AllowedHosts(":8080"); len(got) != 2 {
		t.Errorf("AllowedHosts with an empty --listen host = %q, want only the flag's two", got)
	}
}
