package host

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/signature"
	"github.com/leasehold/leasehold/plugins/status"
)

// signingKey makes a key pair with "leasehold plugin keygen"'s code, in
// files, and returns the private key path and the key id.
func signingKey(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	id, err := signature.GenerateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, id
}

// testSequence numbers the statements tests sign, so that each is newer
// than the last (signature.NextSequence's Unix time could repeat within a
// second).
var testSequence atomic.Uint64

// signFile signs a module or settings file as "leasehold plugin sign"
// does: for the module's own strategy, at the next test sequence.
func signFile(t *testing.T, key, path string) signature.Statement {
	t.Helper()
	name, err := signedStrategy(context.Background(), path, "")
	if err != nil {
		t.Fatal(err)
	}
	return signAs(t, key, path, name, testSequence.Add(1))
}

// signAs signs path for strategy at sequence seq.
func signAs(t *testing.T, key, path, strategy string, seq uint64) signature.Statement {
	t.Helper()
	_, _, st, err := signature.SignFile(key, path, strategy, seq)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fileStatus returns the Modules entry of path.
func fileStatus(t *testing.T, h *Host, path string) status.Module {
	t.Helper()
	for _, st := range h.Modules() {
		if st.File == path {
			return st
		}
	}
	t.Fatalf("%s not in Modules()", path)
	return status.Module{}
}

func shaOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestSignedModules walks one module through a server that trusts one key:
// each refusal reason, a signature written after its module, a refused
// new version that leaves the previous one serving, and a re-signature
// that needs no reload. Every refusal is logged once.
func TestSignedModules(t *testing.T) {
	ctx := context.Background()
	keys, dir := t.TempDir(), t.TempDir()
	trusted, trustedID := signingKey(t, keys, "trusted.key")
	stranger, strangerID := signingKey(t, keys, "stranger.key")
	ring, err := signature.LoadKeyring(trusted + signature.PublicKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	h := quietHost(t, Options{Dir: dir, TrustKeys: ring, Logger: newTextLogger(&logs)})
	path := filepath.Join(dir, "hello.wasm")
	const name = "example.com/hello"

	// Built-ins are part of the binary: trusted without a signature.
	if _, ok := h.Lookup(abi.BuiltinStrategy); !ok {
		t.Fatal("built-in not served with trust keys")
	}
	if st := h.Modules()[0]; !st.Builtin || st.State != status.StateLoaded || st.ABIVersion != "1" {
		t.Fatalf("built-in status: %+v", st)
	}

	// Not even a WebAssembly module: refused for its missing signature,
	// before anything tried to compile it.
	writeFile(t, path, []byte("not wasm at all"))
	h.Scan(ctx)
	if st := fileStatus(t, h, path); st.State != "refused: missing signature" || st.Name != "" {
		t.Fatalf("unsigned garbage: %+v", st)
	}

	v1 := hello(t, "1")
	writeFile(t, path, v1)
	h.Scan(ctx)
	if v := version(t, h, name); v != "" {
		t.Fatalf("unsigned module served: version %q", v)
	}
	st := fileStatus(t, h, path)
	if st.State != "refused: missing signature" || st.SHA256 != shaOf(v1) || st.ABIVersion != "" {
		t.Fatalf("unsigned module: %+v", st)
	}

	// Signed by a key the server does not trust.
	signFile(t, stranger, path)
	h.Scan(ctx)
	st = fileStatus(t, h, path)
	if st.State != "refused: untrusted key id: "+strangerID || st.SignerKeyID != strangerID {
		t.Fatalf("stranger's signature: %+v", st)
	}

	// The signature written after its module is picked up.
	signFile(t, trusted, path)
	h.Scan(ctx)
	if v := version(t, h, name); v != "1" {
		t.Fatalf("signed module: version %q", v)
	}
	st = fileStatus(t, h, path)
	if st.State != status.StateLoaded || st.SignerKeyID != trustedID || st.ABIVersion != "1" || st.LoadError != "" {
		t.Fatalf("signed module: %+v", st)
	}
	served, _ := h.Lookup(name)

	// A new version without a new signature: the old one no longer
	// matches its digest, and version 1 keeps serving.
	v2 := hello(t, "2")
	writeFile(t, path, v2)
	h.Scan(ctx)
	if v := version(t, h, name); v != "1" {
		t.Fatalf("altered module replaced the good one: version %q", v)
	}
	st = fileStatus(t, h, path)
	if st.State != status.StateLoaded || !strings.HasPrefix(st.LoadError, "digest mismatch: ") ||
		st.RefusedSHA256 != shaOf(v2) || st.SHA256 != shaOf(v1) || st.SignerKeyID != trustedID {
		t.Fatalf("altered module: %+v", st)
	}

	// A forged signature: right digest and key id, wrong bytes.
	sig, err := signature.Sign(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), signature.Statement{Kind: signature.KindModule,
		File: "hello.wasm", Strategy: name, SHA256: shaOf(v2), Sequence: testSequence.Add(1)})
	if err != nil {
		t.Fatal(err)
	}
	f, err := signature.ParseFile(sig)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(sig), f.KeyID, trustedID, 1)
	writeFile(t, path+signature.Suffix, []byte(forged))
	h.Scan(ctx)
	if st = fileStatus(t, h, path); st.LoadError != "bad signature: Ed25519 verification failed" || version(t, h, name) != "1" {
		t.Fatalf("forged signature: %+v", st)
	}
	writeFile(t, path+signature.Suffix, []byte("{"))
	h.Scan(ctx)
	if st = fileStatus(t, h, path); !strings.HasPrefix(st.LoadError, "bad signature: not a signature file") {
		t.Fatalf("garbled signature: %+v", st)
	}

	// Scans of unchanged files log nothing more.
	before := strings.Count(logs.String(), "strategy module refused")
	h.Scan(ctx)
	h.Scan(ctx)
	if after := strings.Count(logs.String(), "strategy module refused"); after != before || before != 6 {
		t.Fatalf("refusals logged %d times, then %d (want 6, once each)", before, after)
	}
	for _, reason := range []string{"missing signature", "untrusted key id", "digest mismatch", "bad signature"} {
		if !strings.Contains(logs.String(), `reason="`+reason+`"`) {
			t.Errorf("no refusal logged with reason %q", reason)
		}
	}

	// Signed properly, version 2 serves.
	signFile(t, trusted, path)
	h.Scan(ctx)
	if v := version(t, h, name); v != "2" {
		t.Fatalf("signed version 2: version %q", v)
	}
	if st = fileStatus(t, h, path); st.LoadError != "" || st.RefusedSHA256 != "" || st.SHA256 != shaOf(v2) {
		t.Fatalf("signed version 2: %+v", st)
	}
	if s, _ := h.Lookup(name); s == served {
		t.Fatal("version 1 still served")
	}
}

// TestKeyRotation: during a rollout the server trusts the old and the new
// key; re-signing the serving module with the new key changes its signer
// without reloading it, and once the old key is dropped (a restart with
// the new trust file) a module signed with the old key is refused.
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	keys, dir := t.TempDir(), t.TempDir()
	oldKey, oldID := signingKey(t, keys, "old.key")
	newKey, newID := signingKey(t, keys, "new.key")
	both, err := signature.LoadKeyring(oldKey+signature.PublicKeySuffix, newKey+signature.PublicKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hello.wasm")
	writeFile(t, path, hello(t, "1"))
	signFile(t, oldKey, path)

	h := quietHost(t, Options{Dir: dir, TrustKeys: both})
	h.Scan(ctx)
	first, ok := h.Lookup("example.com/hello")
	if !ok || fileStatus(t, h, path).SignerKeyID != oldID {
		t.Fatalf("old key's signature: %+v", fileStatus(t, h, path))
	}
	signFile(t, newKey, path)
	h.Scan(ctx)
	if s, _ := h.Lookup("example.com/hello"); s != first {
		t.Fatal("a new signature of the same module reloaded it")
	}
	if st := fileStatus(t, h, path); st.SignerKeyID != newID || st.LoadError != "" {
		t.Fatalf("new key's signature: %+v", st)
	}

	newOnly, err := signature.LoadKeyring(newKey + signature.PublicKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.wasm")
	writeFile(t, other, hello(t, "9")) // same strategy name: fine, it is refused before it is read
	signFile(t, oldKey, other)
	h2 := quietHost(t, Options{Dir: dir, TrustKeys: newOnly})
	h2.Scan(ctx)
	if st := fileStatus(t, h2, other); st.State != "refused: untrusted key id: "+oldID {
		t.Fatalf("old key after rotation: %+v", st)
	}
	if st := fileStatus(t, h2, path); st.State != status.StateLoaded || st.SignerKeyID != newID {
		t.Fatalf("new key after rotation: %+v", st)
	}
}

// TestUnsignedWithoutTrustKeys: without trust keys nothing is verified and
// signature files are not read, as before signing existed.
func TestUnsignedWithoutTrustKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hello.wasm")
	writeFile(t, path, hello(t, "1"))
	if err := os.WriteFile(path+signature.Suffix, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := quietHost(t, Options{Dir: dir})
	h.Scan(context.Background())
	st := fileStatus(t, h, path)
	if v := version(t, h, "example.com/hello"); v != "1" || st.State != status.StateLoaded || st.SignerKeyID != "" {
		t.Fatalf("without trust keys: version %q, %+v", v, st)
	}
}
