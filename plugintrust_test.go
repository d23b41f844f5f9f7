package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/cli"
	"github.com/leasehold/leasehold/plugins/signature"
)

// TestPluginTrust: without --plugin-trust-keys a server listening beyond
// loopback warns that modules are not verified; on loopback it does not;
// with keys it logs the trusted key ids, and an unreadable trust file stops
// the start.
func TestPluginTrust(t *testing.T) {
	logged := func(cfg serveConfig) (string, error) {
		var buf bytes.Buffer
		_, err := pluginTrust(cfg, slog.New(slog.NewTextHandler(&buf, nil)))
		return buf.String(), err
	}
	const warning = "Strategy modules are not verified"
	for listen, want := range map[string]bool{"0.0.0.0:8080": true, ":8080": true, "10.0.0.7:8443": true, "127.0.0.1:8080": false, "localhost:0": false, "[::1]:8080": false} {
		out, err := logged(serveConfig{Listen: listen, PluginsDir: "p"})
		if err != nil || strings.Contains(out, warning) != want {
			t.Errorf("--listen %s: warned %v (want %v), err %v: %s", listen, !want, want, err, out)
		}
	}

	dir := t.TempDir()
	id, err := signature.GenerateKey(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := logged(serveConfig{Listen: "0.0.0.0:8080", PluginTrustKeys: []string{filepath.Join(dir, "k.pub")}})
	if err != nil || strings.Contains(out, warning) || !strings.Contains(out, id) {
		t.Errorf("with trust keys: err %v, log %s", err, out)
	}
	if _, err := logged(serveConfig{Listen: "127.0.0.1:8080", PluginTrustKeys: []string{filepath.Join(dir, "missing.pub")}}); err == nil {
		t.Error("a missing trust file did not stop the start")
	}
}

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
