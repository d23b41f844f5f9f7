package cluster

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/datadir"
)

// TestNewMemberState: a member's client listener defaults to the port
// below its peer port, it advertises the --peer-listen host (or
// --advertise-host), its certificate covers that and loopback, and a bad
// name or port is refused with the flag to fix.
func TestNewMemberState(t *testing.T) {
	st, hosts, err := newMemberState(Flags{PeerListen: "10.0.0.7:2380", Name: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if st.ListenClient != "10.0.0.7:2379" || st.AdvertisePeer != "https://10.0.0.7:2380" || st.AdvertiseClient != "https://10.0.0.7:2379" {
		t.Errorf("state %+v", st)
	}
	if strings.Join(hosts, ",") != "10.0.0.7,127.0.0.1,::1,localhost" {
		t.Errorf("hosts %q", hosts)
	}
	st, _, err = newMemberState(Flags{PeerListen: "0.0.0.0:2380", ClientListen: "0.0.0.0:3379", AdvertiseHost: "dev-1.lan", Name: "m1"})
	if err != nil || st.AdvertisePeer != "https://dev-1.lan:2380" || st.AdvertiseClient != "https://dev-1.lan:3379" {
		t.Errorf("--advertise-host: %+v, %v", st, err)
	}
	if st, _, err := newMemberState(Flags{PeerListen: "127.0.0.1:2380"}); err != nil || !strings.HasSuffix(st.Name, "-2380") {
		t.Errorf("default name %q, %v: want host name and peer port", st.Name, err)
	}
	for f, want := range map[Flags]string{
		{PeerListen: "127.0.0.1:http", Name: "m1"}:    "--peer-listen",
		{PeerListen: "127.0.0.1:2380", Name: "-bad"}:  "invalid member name",
		{PeerListen: "127.0.0.1:2380", Name: "a b/c"}: "invalid member name",
	} {
		if _, _, err := newMemberState(f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", f, err, want)
		}
	}
}

// TestClusterToken: a given token (flag or file) is stored, so that a
// restart needs none; a later start reads it back, and a new one replaces
// it.
func TestClusterToken(t *testing.T) {
	paths := datadir.At(t.TempDir()).Member()
	if tok, err := clusterToken(Flags{}, paths); err != nil || tok != nil {
		t.Fatalf("nothing given, nothing stored: %q, %v", tok, err)
	}
	if tok, err := clusterToken(Flags{Token: "s3cret-s3cret-s3cret"}, paths); err != nil || string(tok) != "s3cret-s3cret-s3cret" {
		t.Fatalf("--cluster-token: %q, %v", tok, err)
	}
	if tok, err := clusterToken(Flags{}, paths); err != nil || string(tok) != "s3cret-s3cret-s3cret" {
		t.Fatalf("stored token: %q, %v", tok, err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("  rotated-rotated-rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := clusterToken(Flags{TokenFile: file}, paths); err != nil || string(tok) != "rotated-rotated-rotated" {
		t.Fatalf("--cluster-token-file: %q, %v", tok, err)
	}
	if data, _ := os.ReadFile(paths.TokenFile); string(data) != "rotated-rotated-rotated\n" {
		t.Errorf("stored %q", data)
	}
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := clusterToken(Flags{TokenFile: file}, paths); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty token file: %v", err)
	}
}

// TestProvisionRefusals: a member that never started restarts only with
// --cluster-init or --join; neither works without a token; and a joiner
// refuses a data directory holding a staged restore before it contacts
// anyone.
func TestProvisionRefusals(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := datadir.At(t.TempDir())
	if _, err := Provision(ctx, Flags{Join: "http://127.0.0.1:1", PeerListen: "127.0.0.1:2380", Name: "m2"}, dir, "/leasehold", log); err == nil || !strings.Contains(err.Error(), "--join needs --cluster-token") {
		t.Errorf("--join without a token: %v", err)
	}
	if err := WriteFile(dir.Member().State, []byte(`{"name":"m1","advertisePeer":"https://a:1","advertiseClient":"https://a:2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Provision(ctx, Flags{Token: "0123456789abcdef"}, dir, "/leasehold", log); err == nil || !strings.Contains(err.Error(), "never started") {
		t.Errorf("a member that never started, no flags: %v", err)
	}
	if err := WriteFile(dir.Member().RestoreSnapshot, []byte("staged"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Provision(ctx, Flags{Join: "http://127.0.0.1:1", Token: "0123456789abcdef", PeerListen: "127.0.0.1:2380", Name: "m2"}, dir, "/leasehold", log)
	if err == nil || !strings.Contains(err.Error(), "staged by leasehold restore") {
		t.Errorf("--join beside a staged restore: %v", err)
	}
}

// TestShortTokenRefused: a token under 16 bytes, given by flag or file or
// stored by an older version, is refused before anything is written, with
// a message that says how to make one.
func TestShortTokenRefused(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := datadir.At(t.TempDir())
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("T\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Flags{
		{Init: true, Token: "T", PeerListen: "127.0.0.1:2380", Name: "m1"},
		{Init: true, Token: "fifteen-bytes!!", PeerListen: "127.0.0.1:2380", Name: "m1"},
		{Init: true, TokenFile: file, PeerListen: "127.0.0.1:2380", Name: "m1"},
		{Join: "http://127.0.0.1:1", Token: "T", PeerListen: "127.0.0.1:2380", Name: "m2"},
	} {
		_, err := Provision(ctx, f, dir, "/leasehold", log)
		if err == nil || !strings.Contains(err.Error(), "at least 16") || !strings.Contains(err.Error(), "openssl rand") {
			t.Errorf("%+v: %v, want a refusal of the short token", f, err)
		}
	}
	if _, err := os.Stat(dir.Member().TokenFile); err == nil {
		t.Error("a refused token was stored")
	}
	_, err := PrepareReplica(ctx, Flags{Join: "http://127.0.0.1:1", Replica: true, Token: "T"}, dir.Replica(), log)
	if err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a replica's short token: %v", err)
	}
	// A short token an older version stored stops a restart too.
	if err := WriteFile(dir.Member().TokenFile, []byte("T\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Provision(ctx, Flags{}, dir, "/leasehold", log); err == nil || !strings.Contains(err.Error(), "stored in") {
		t.Errorf("a stored short token: %v", err)
	}
}

// TestInitGeneratesToken: --cluster-init without a token generates 256
// random bits, stores them 0600 before the member starts, says which file
// (never the token) in the log, and a restart reads the same token back.
func TestInitGeneratesToken(t *testing.T) {
	ctx := context.Background()
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	dir := datadir.At(t.TempDir())
	p, err := Provision(ctx, Flags{Init: true, PeerListen: "127.0.0.1:2380", Name: "m1"}, dir, "/leasehold", log)
	if err != nil {
		t.Fatal(err)
	}
	file := p.GeneratedToken()
	if file != dir.Member().TokenFile {
		t.Fatalf("generated token file %q, want %q", file, dir.Member().TokenFile)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(file)
	token := strings.TrimSpace(string(data))
	if len(token) != 64 || strings.Trim(token, "0123456789abcdef") != "" {
		t.Errorf("generated token %q: want 64 hex digits (256 bits)", token)
	}
	if string(p.token) != token {
		t.Error("the member does not use the token it stored")
	}
	if strings.Contains(logged.String(), token) {
		t.Errorf("the token was logged: %s", logged.String())
	}
	if !strings.Contains(logged.String(), file) {
		t.Errorf("the log does not say where the token is: %s", logged.String())
	}
	again, err := clusterToken(Flags{}, dir.Member())
	if err != nil || string(again) != token {
		t.Errorf("a restart reads %q, %v; want the generated token", again, err)
	}
}
