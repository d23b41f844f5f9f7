package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/cli"
)

// TestPluginTrustKeysFlag: the flag takes a comma-separated list of files.
func TestPluginTrustKeysFlag(t *testing.T) {
	var stderr bytes.Buffer
	cfg, err := parseServeFlags(cli.NewFlagSet("serve", "", &stderr), []string{"--plugin-trust-keys", "a.pub, b.pub,,"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.PluginTrustKeys, "|"); got != "a.pub|b.pub" {
		t.Fatalf("PluginTrustKeys = %q", got)
	}
}
