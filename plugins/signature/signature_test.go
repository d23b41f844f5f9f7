package signature

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
	sigPath, signer, st, err := SignFile(key, module, "example.com/m", 7)
	if err != nil || sigPath != module+Suffix || signer != id {
		t.Fatalf("SignFile = %q, %q, %v", sigPath, signer, err)
	}
	want := Statement{Kind: KindModule, File: "m.wasm", Strategy: "example.com/m", SHA256: shaHex(wasm), Sequence: 7}
	if st != want {
		t.Fatalf("statement %+v, want %+v", st, want)
	}
	sig, _ := os.ReadFile(sigPath)
	f, err := ParseFile(sig)
	if err != nil || f.Version != 2 || f.Algorithm != "ed25519" || f.KeyID != id || f.Statement != want {
		t.Fatalf("signature file %+v, %v:\n%s", f, err, sig)
	}
	ring, err := LoadKeyring(key + PublicKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ring.Verify(KindModule, "m.wasm", sha256.Sum256(wasm), sig); err != nil || got.KeyID != id || got.Statement != want {
		t.Fatalf("Verify = %+v, %v", got, err)
	}

	// The documented message, verifiable by any Ed25519 implementation.
	pubs, _ := ParsePublicKeys(mustRead(t, key+PublicKeySuffix))
	raw := decodeSig(t, f.Signature)
	msg := "leasehold-plugin-statement-v2\nkind=module\nfile=m.wasm\nstrategy=example.com/m\nsha256=" + f.SHA256 + "\nsequence=7\n"
	if !ed25519.Verify(pubs[0], []byte(msg), raw) {
		t.Fatal("the signature is not over the documented message")
	}

	// A format 1 signature (a digest alone) made with the same key.
	priv, _ := ParsePrivateKey(mustRead(t, key))
	legacyMsg := "leasehold-plugin-signature-v1 sha256:" + f.SHA256
	legacy := `{"version":1,"algorithm":"ed25519","keyId":"` + id + `","sha256":"` + f.SHA256 +
		`","signature":"` + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(legacyMsg))) + `"}`

	cases := []struct {
		name    string
		kind    Kind
		file    string
		content []byte
		sig     []byte
		reason  Reason
	}{
		{"missing", KindModule, "m.wasm", wasm, nil, ReasonMissing},
		{"not JSON", KindModule, "m.wasm", wasm, []byte("x"), ReasonBad},
		{"unknown field", KindModule, "m.wasm", wasm, []byte(strings.Replace(string(sig), `"version"`, `"extra":1,"version"`, 1)), ReasonBad},
		{"future version", KindModule, "m.wasm", wasm, []byte(strings.Replace(string(sig), `"version": 2`, `"version": 3`, 1)), ReasonBad},
		{"format 1", KindModule, "m.wasm", wasm, []byte(legacy), ReasonLegacy},
		{"untrusted", KindModule, "m.wasm", wasm, []byte(strings.Replace(string(sig), id, "0000000000000000", 1)), ReasonUntrusted},
		{"edited file name", KindModule, "n.wasm", wasm, []byte(strings.Replace(string(sig), `"m.wasm"`, `"n.wasm"`, 1)), ReasonBad},
		{"edited sequence", KindModule, "m.wasm", wasm, []byte(strings.Replace(string(sig), `"sequence": 7`, `"sequence": 8`, 1)), ReasonBad},
		{"other file", KindModule, "n.wasm", wasm, sig, ReasonOtherFile},
		{"other kind", KindSettings, "m.json", wasm, sig, ReasonOtherKind},
		{"other content", KindModule, "m.wasm", []byte("other"), sig, ReasonDigest},
	}
	for _, c := range cases {
		_, err := ring.Verify(c.kind, c.file, sha256.Sum256(c.content), c.sig)
		var r *RefusedError
		if !errors.As(err, &r) || r.Reason != c.reason || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: err = %v, want reason %q", c.name, err, c.reason)
		}
	}
	if _, err := ring.Verify(KindModule, "m.wasm", sha256.Sum256(wasm), []byte(legacy)); err == nil ||
		!strings.Contains(err.Error(), "re-sign with \"leasehold plugin sign") {
		t.Errorf("format 1 refusal does not say how to re-sign: %v", err)
	}
}

// TestStatementValidate: what Sign refuses to put in a statement.
func TestStatementValidate(t *testing.T) {
	good := Statement{Kind: KindSettings, File: "a.json", Strategy: "example.com/a", SHA256: shaHex(nil), Sequence: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Statement){
		"path":          func(s *Statement) { s.File = "dir/a.json" },
		"hidden":        func(s *Statement) { s.File = ".a.json" },
		"newline":       func(s *Statement) { s.File = "a\n.json" },
		"kind vs file":  func(s *Statement) { s.Kind = KindModule },
		"unknown kind":  func(s *Statement) { s.Kind = "plugin" },
		"strategy":      func(s *Statement) { s.Strategy = "no-slash" },
		"upper sha":     func(s *Statement) { s.SHA256 = strings.ToUpper(s.SHA256) },
		"zero sequence": func(s *Statement) { s.Sequence = 0 },
	} {
		s := good
		edit(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: %+v accepted", name, s)
		}
	}
}

// TestNextSequence: the default sequence is the Unix time, or one more
// than the existing signature's when that is not smaller.
func TestNextSequence(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if _, err := GenerateKey(key); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.json")
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	if got := NextSequence(path+Suffix, now); got != 1_800_000_000 {
		t.Fatalf("without a signature: %d", got)
	}
	if _, _, _, err := SignFile(key, path, "example.com/a", 1_900_000_000); err != nil {
		t.Fatal(err)
	}
	if got := NextSequence(path+Suffix, now); got != 1_900_000_001 {
		t.Fatalf("after a signature with a later sequence: %d", got)
	}
	_, _, st, err := SignFile(key, path, "example.com/a", 0)
	if err != nil || st.Sequence != 1_900_000_001 {
		t.Fatalf("SignFile with the default sequence: %+v, %v", st, err)
	}
}

func shaHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
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
