package signature

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGenerateKeyFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "signing.key")
	id, err := GenerateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v, want 0600", info.Mode().Perm())
	}
	privPEM, _ := os.ReadFile(path)
	pubPEM, err := os.ReadFile(path + PublicKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := ParsePublicKeys(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(pubs) != 1 || !pubs[0].Equal(priv.Public()) || KeyID(pubs[0]) != id || len(id) != 16 {
		t.Fatalf("public key does not match the private key (id %q)", id)
	}
	if !strings.HasPrefix(string(privPEM), "-----BEGIN PRIVATE KEY-----") || !strings.HasPrefix(string(pubPEM), "-----BEGIN PUBLIC KEY-----") {
		t.Fatalf("unexpected PEM types:\n%s\n%s", privPEM, pubPEM)
	}

	// Never overwrite: neither the key nor a stray .pub.
	if _, err := GenerateKey(path); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second keygen: %v", err)
	}
	again, _ := os.ReadFile(path)
	if string(again) != string(privPEM) {
		t.Fatal("the private key was overwritten")
	}
	lone := filepath.Join(dir, "lone.key")
	if err := os.WriteFile(lone+PublicKeySuffix, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateKey(lone); err == nil {
		t.Fatal("keygen overwrote an existing .pub")
	}
	if _, err := os.Stat(lone); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("keygen left a private key without its public key: %v", err)
	}
}

func TestSignAndVerify(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	id, err := GenerateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(dir, "m.wasm")
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	if err := os.WriteFile(module, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	sigPath, signer, err := SignModule(key, module)
	if err != nil || sigPath != module+Suffix || signer != id {
		t.Fatalf("SignModule = %q, %q, %v", sigPath, signer, err)
	}
	sig, _ := os.ReadFile(sigPath)
	f, err := ParseFile(sig)
	if err != nil || f.Version != 1 || f.Algorithm != "ed25519" || f.KeyID != id {
		t.Fatalf("signature file %+v, %v:\n%s", f, err, sig)
	}
	ring, err := LoadKeyring(key + PublicKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ring.Verify(sha256.Sum256(wasm), sig); err != nil || got != id {
		t.Fatalf("Verify = %q, %v", got, err)
	}

	// The documented message, verifiable by any Ed25519 implementation.
	pubs, _ := ParsePublicKeys(mustRead(t, key+PublicKeySuffix))
	raw := decodeSig(t, f.Signature)
	if !ed25519.Verify(pubs[0], []byte("leasehold-plugin-signature-v1 sha256:"+f.SHA256), raw) {
		t.Fatal("the signature is not over the documented message")
	}

	cases := []struct {
		name   string
		digest []byte
		sig    []byte
		reason Reason
	}{
		{"missing", wasm, nil, ReasonMissing},
		{"not JSON", wasm, []byte("x"), ReasonBad},
		{"unknown field", wasm, []byte(strings.Replace(string(sig), `"version"`, `"extra":1,"version"`, 1)), ReasonBad},
		{"future version", wasm, []byte(strings.Replace(string(sig), `"version": 1`, `"version": 2`, 1)), ReasonBad},
		{"untrusted", wasm, []byte(strings.Replace(string(sig), id, "0000000000000000", 1)), ReasonUntrusted},
		{"other module", []byte("other"), sig, ReasonDigest},
	}
	for _, c := range cases {
		_, err := ring.Verify(sha256.Sum256(c.digest), c.sig)
		var r *RefusedError
		if !errors.As(err, &r) || r.Reason != c.reason || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: err = %v, want reason %q", c.name, err, c.reason)
		}
	}
}

func TestTrustFileWithSeveralKeys(t *testing.T) {
	dir := t.TempDir()
	var all []byte
	var ids []string
	for _, n := range []string{"a", "b"} {
		id, err := GenerateKey(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		all = append(all, []byte("# key "+n+"\n")...)
		all = append(all, mustRead(t, filepath.Join(dir, n+PublicKeySuffix))...)
	}
	trust := filepath.Join(dir, "trusted.pub")
	if err := os.WriteFile(trust, all, 0o644); err != nil {
		t.Fatal(err)
	}
	ring, err := LoadKeyring(trust)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ring.IDs(), ","); got != strings.Join(sortedCopy(ids), ",") {
		t.Fatalf("IDs = %s, want %v", got, ids)
	}
	if err := os.WriteFile(trust, []byte("no keys here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyring(trust); err == nil {
		t.Fatal("a trust file without keys was accepted")
	}
	if _, err := LoadKeyring(filepath.Join(dir, "missing.pub")); err == nil {
		t.Fatal("a missing trust file was accepted")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
func decodeSig(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
