package host

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/signature"
	"github.com/leasehold/leasehold/plugins/status"
)

// named builds testdata/hello.wat as strategy name at version.
func named(t *testing.T, name, version string) []byte {
	t.Helper()
	src, err := os.ReadFile("testdata/hello.wat")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(src), "VERSION", version)
	return wat(t, strings.Replace(text, "example.com/hello", name, 1))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	writeFile(t, to, mustRead(t, from))
}

// trustedHost is a host that trusts the key in keys/fleet.key (made if
// missing), with seqs (nil: a memory of the host alone).
func trustedHost(t *testing.T, dir, keys string, seqs *signature.Sequences, log *slog.Logger) (*Host, string) {
	t.Helper()
	key := filepath.Join(keys, "fleet.key")
	if _, err := os.Stat(key); err != nil {
		signingKey(t, keys, "fleet.key")
	}
	ring, err := signature.LoadKeyring(key + signature.PublicKeySuffix)
	if err != nil {
		t.Fatal(err)
	}
	return quietHost(t, Options{Dir: dir, TrustKeys: ring, Sequences: seqs, Logger: log}), key
}

// TestSignedForAnotherFile is the rename attack of issue 28: settings
// signed for a.json, copied with their signature beside b.wasm as b.json,
// are refused (before, they loaded: the signature covered the content
// alone); so are a module copied under another name, settings signed as a
// module, and statements naming another strategy than the module's.
func TestSignedForAnotherFile(t *testing.T) {
	ctx := context.Background()
	dir, keys := t.TempDir(), t.TempDir()
	h, key := trustedHost(t, dir, keys, nil, nil)
	a, b := filepath.Join(dir, "a.wasm"), filepath.Join(dir, "b.wasm")
	writeFile(t, a, named(t, "example.com/a", "1"))
	writeFile(t, b, named(t, "example.com/b", "1"))
	aSettings := filepath.Join(dir, "a.json")
	writeFile(t, aSettings, []byte(`{"zone":"a"}`))
	for _, p := range []string{a, b, aSettings} {
		signFile(t, key, p)
	}
	h.Scan(ctx)
	if got, _ := servedSettings(t, h, "example.com/a"); got != `{"zone":"a"}` {
		t.Fatalf("a's signed settings not served: %q", got)
	}
	if got, _ := servedSettings(t, h, "example.com/b"); got != "" {
		t.Fatalf("b serves settings %q before any were given", got)
	}

	// a.json and its signature copied as b.json.
	bSettings := filepath.Join(dir, "b.json")
	copyFile(t, aSettings, bSettings)
	copyFile(t, aSettings+signature.Suffix, bSettings+signature.Suffix)
	h.Scan(ctx)
	if got, _ := servedSettings(t, h, "example.com/b"); got != "" {
		t.Fatalf("REGRESSION (issue 28 item 3): settings signed for a.json serve b as b.json: %q", got)
	}
	st := fileStatus(t, h, b)
	if !strings.Contains(st.LoadError, "signed for another file: signed for a.json, this is b.json") || st.SettingsSHA256 != "" {
		t.Fatalf("b with a's settings: status %+v", st)
	}

	// Signed for b.json, but for a's strategy (signed with --strategy).
	signAs(t, key, bSettings, "example.com/a", testSequence.Add(1))
	h.Scan(ctx)
	if st := fileStatus(t, h, b); !strings.Contains(st.LoadError, "signed for another strategy: settings signed for example.com/a, module for example.com/b") {
		t.Fatalf("settings signed for another strategy: %+v", st)
	}
	// Signed for b.json and b: served.
	signFile(t, key, bSettings)
	h.Scan(ctx)
	if got, _ := servedSettings(t, h, "example.com/b"); got != `{"zone":"a"}` {
		t.Fatalf("settings signed for b.json not served: %q", got)
	}

	// A module and its signature copied under another name, and a
	// settings signature put beside a module.
	c := filepath.Join(dir, "c.wasm")
	copyFile(t, a, c)
	copyFile(t, a+signature.Suffix, c+signature.Suffix)
	d := filepath.Join(dir, "d.wasm")
	writeFile(t, d, mustRead(t, aSettings)) // content matching the settings' digest
	copyFile(t, aSettings+signature.Suffix, d+signature.Suffix)
	h.Scan(ctx)
	if st := fileStatus(t, h, c); st.State != "refused: signed for another file: signed for a.wasm, this is c.wasm" {
		t.Fatalf("module copied as c.wasm: %+v", st)
	}
	if st := fileStatus(t, h, d); !strings.HasPrefix(st.State, "refused: signed for another kind: signed as settings a.json") {
		t.Fatalf("settings signature beside a module: %+v", st)
	}

	// A module whose statement names another strategy than its info:
	// refused once loaded, nothing served under either name.
	e := filepath.Join(dir, "e.wasm")
	writeFile(t, e, named(t, "example.com/e", "1"))
	signAs(t, key, e, "example.com/other", testSequence.Add(1))
	h.Scan(ctx)
	if st := fileStatus(t, h, e); st.State != "refused: signed for another strategy: signed for example.com/other, the module is example.com/e" {
		t.Fatalf("module signed for another strategy: %+v", st)
	}
	for _, name := range []string{"example.com/e", "example.com/other"} {
		if _, ok := h.Lookup(name); ok {
			t.Fatalf("%s served from a module signed for another strategy", name)
		}
	}
}

// TestSignedRollback: an older signed module or settings file put back
// (with its own, valid signature) is refused while the newer keeps
// serving, and after a restart too: the state file in the data directory
// remembers. Without the state file the pinned minimum still refuses it
// (and the missing state is logged once); --plugin-allow-rollback lets the
// operator go back on purpose.
func TestSignedRollback(t *testing.T) {
	ctx := context.Background()
	dir, keys, data := t.TempDir(), t.TempDir(), t.TempDir()
	statePath := filepath.Join(data, "plugin-sequences.json")
	open := func(pins signature.Pins) (*Host, *syncBuffer) {
		var logs syncBuffer
		log := newTextLogger(&logs)
		seqs, err := signature.OpenSequences(statePath, pins, log)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := trustedHost(t, dir, keys, seqs, log)
		return h, &logs
	}
	h, logs := open(signature.Pins{})
	if n := strings.Count(logs.String(), "Strategy signature state is missing"); n != 1 {
		t.Fatalf("first start: the missing state logged %d times, want once:\n%s", n, logs)
	}
	key := filepath.Join(keys, "fleet.key")
	path, settings := filepath.Join(dir, "hello.wasm"), filepath.Join(dir, "hello.json")
	const name = "example.com/hello"

	// Version 1 (sequence 10) with settings (sequence 10), kept aside
	// with their signatures.
	writeFile(t, path, hello(t, "1"))
	writeFile(t, settings, []byte(`{"zone":"old"}`))
	signAs(t, key, path, name, 10)
	signAs(t, key, settings, name, 10)
	h.Scan(ctx)
	if v := version(t, h, name); v != "1" {
		t.Fatalf("version 1 (sequence 10): version %q", v)
	}
	aside := t.TempDir()
	for _, f := range []string{path, path + signature.Suffix, settings, settings + signature.Suffix} {
		copyFile(t, f, filepath.Join(aside, filepath.Base(f)))
	}
	putBack := func(files ...string) {
		t.Helper()
		for _, f := range files {
			copyFile(t, filepath.Join(aside, filepath.Base(f)), f)
		}
	}

	// Version 2 (sequence 20) with new settings (sequence 20).
	writeFile(t, path, hello(t, "2"))
	writeFile(t, settings, []byte(`{"zone":"new"}`))
	signAs(t, key, path, name, 20)
	signAs(t, key, settings, name, 20)
	h.Scan(ctx)
	if v := version(t, h, name); v != "2" {
		t.Fatalf("version 2 (sequence 20): version %q", v)
	}
	if st := fileStatus(t, h, path); st.SignedSequence != 20 {
		t.Fatalf("version 2: status shows sequence %d, want 20", st.SignedSequence)
	}
	if info, err := os.Stat(statePath); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v (want 0600)", info, err)
	}

	// The old module put back: refused, version 2 keeps serving.
	putBack(path, path+signature.Suffix)
	h.Scan(ctx)
	if v := version(t, h, name); v != "2" {
		t.Fatalf("REGRESSION (issue 28 item 3): an older signed module replaced the newer: version %q", v)
	}
	if st := fileStatus(t, h, path); !strings.HasPrefix(st.LoadError, "rollback: example.com/hello module sequence 10, newest accepted 20") {
		t.Fatalf("module rollback: %+v", st)
	}
	// The new module back, the old settings put back: refused too.
	writeFile(t, path, hello(t, "2"))
	signAs(t, key, path, name, 20)
	putBack(settings, settings+signature.Suffix)
	h.Scan(ctx)
	if got, _ := servedSettings(t, h, name); got != `{"zone":"new"}` {
		t.Fatalf("REGRESSION (issue 28 item 3): older signed settings serve: %q", got)
	}
	if st := fileStatus(t, h, path); !strings.Contains(st.LoadError, "rollback: example.com/hello settings sequence 10, newest accepted 20") {
		t.Fatalf("settings rollback: %+v", st)
	}

	// A restart on the old files remembers: nothing of them serves.
	putBack(path, path+signature.Suffix)
	h.Close(ctx)
	h, logs = open(signature.Pins{})
	h.Scan(ctx)
	if st := fileStatus(t, h, path); !strings.HasPrefix(st.State, "refused: rollback: ") {
		t.Fatalf("after a restart, the old module: %+v", st)
	}
	if strings.Contains(logs.String(), "state is missing") {
		t.Fatalf("the state file was reported missing: %s", logs)
	}

	// The state file deleted: the pinned minimum still refuses, and the
	// missing state is logged once.
	h.Close(ctx)
	if err := os.Remove(statePath); err != nil {
		t.Fatal(err)
	}
	h, logs = open(signature.Pins{MinByStrategy: map[string]uint64{name: 20}})
	h.Scan(ctx)
	h.Scan(ctx)
	if st := fileStatus(t, h, path); !strings.HasPrefix(st.State, "refused: below the pinned minimum sequence: example.com/hello module sequence 10, pinned minimum 20") {
		t.Fatalf("state deleted, minimum pinned: %+v", st)
	}
	if n := strings.Count(logs.String(), `level=WARN msg="Strategy signature state is missing`); n != 1 {
		t.Fatalf("the missing state logged %d times, want once:\n%s", n, logs)
	}

	// The operator goes back on purpose.
	h.Close(ctx)
	if err := os.Remove(statePath); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, hello(t, "2"))
	signAs(t, key, path, name, 20)
	writeFile(t, settings, []byte(`{"zone":"new"}`))
	signAs(t, key, settings, name, 20)
	h, _ = open(signature.Pins{})
	h.Scan(ctx)
	if v := version(t, h, name); v != "2" {
		t.Fatalf("version 2 again: %q", v)
	}
	h.Close(ctx)
	putBack(path, path+signature.Suffix, settings, settings+signature.Suffix)
	h, logs = open(signature.Pins{AllowRollback: []string{name}})
	h.Scan(ctx)
	if v := version(t, h, name); v != "1" {
		t.Fatalf("rollback allowed: version %q, %+v", v, fileStatus(t, h, path))
	}
	if got, _ := servedSettings(t, h, name); got != `{"zone":"old"}` {
		t.Fatalf("rollback allowed: settings %q", got)
	}
	if st := fileStatus(t, h, path); st.State != status.StateLoaded || !strings.Contains(logs.String(), "Strategy rollback accepted") {
		t.Fatalf("rollback allowed: %+v\n%s", st, logs)
	}
}

// TestSignCommand: "leasehold plugin sign" writes a statement for the
// module's own strategy (read from the module), for settings that of the
// module beside them (or --strategy without one), at --sequence or the
// default; a --strategy the module contradicts is an error.
func TestSignCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key, id := signingKey(t, dir, "fleet.key")
	path, settings := filepath.Join(dir, "hello.wasm"), filepath.Join(dir, "hello.json")
	writeFile(t, path, hello(t, "1"))
	writeFile(t, settings, []byte(`{"zone":"a"}`))
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := signSubcommand.Run(ctx, args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	read := func(p string) signature.File {
		t.Helper()
		f, err := signature.ParseFile(mustRead(t, p+signature.Suffix))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if code, out, errOut := run("--key", key, "--sequence", "7", path); code != 0 ||
		!strings.Contains(out, "wrote "+path+".sig (key id "+id+"): module hello.wasm for strategy example.com/hello, sequence 7") {
		t.Fatalf("sign module: exit %d\n%s%s", code, out, errOut)
	}
	if f := read(path); f.Kind != signature.KindModule || f.File != "hello.wasm" || f.Strategy != "example.com/hello" ||
		f.Sequence != 7 || f.SHA256 != shaOf(mustRead(t, path)) || f.KeyID != id {
		t.Fatalf("module statement %+v", f)
	}
	before := time.Now().Unix()
	if code, out, errOut := run("--key", key, settings); code != 0 {
		t.Fatalf("sign settings: exit %d\n%s%s", code, out, errOut)
	}
	if f := read(settings); f.Kind != signature.KindSettings || f.File != "hello.json" || f.Strategy != "example.com/hello" ||
		f.Sequence < uint64(before) {
		t.Fatalf("settings statement %+v (want the Unix time as the default sequence, at least %d)", f, before)
	}
	if code, _, errOut := run("--key", key, "--strategy", "example.com/other", path); code != 1 ||
		!strings.Contains(errOut, "wrong strategy: --strategy example.com/other, but "+path+" is strategy example.com/hello") {
		t.Fatalf("sign with a contradicting --strategy: exit %d, %s", code, errOut)
	}
	lone := filepath.Join(dir, "lone.json")
	writeFile(t, lone, []byte(`{}`))
	if code, _, errOut := run("--key", key, lone); code != 1 || !strings.Contains(errOut, "give --strategy") {
		t.Fatalf("settings without their module nor --strategy: exit %d, %s", code, errOut)
	}
	if code, out, errOut := run("--key", key, "--strategy", "example.com/lone", lone); code != 0 || read(lone).Strategy != "example.com/lone" {
		t.Fatalf("settings with --strategy: exit %d\n%s%s", code, out, errOut)
	}
	// A module this binary cannot load is signed for the strategy given.
	broken := filepath.Join(dir, "broken.wasm")
	writeFile(t, broken, []byte("\x00asm\x01\x00\x00\x00 not a module"))
	if code, _, errOut := run("--key", key, broken); code != 1 {
		t.Fatalf("sign an unloadable module without --strategy: exit %d, %s", code, errOut)
	}
	if code, _, errOut := run("--key", key, "--strategy", "example.com/broken", broken); code != 0 ||
		!strings.Contains(errOut, "signing for --strategy example.com/broken") || read(broken).Strategy != "example.com/broken" {
		t.Fatalf("sign an unloadable module with --strategy: exit %d, %s", code, errOut)
	}
	other := filepath.Join(dir, "notes.txt")
	writeFile(t, other, []byte("x"))
	if code, _, errOut := run("--key", key, other); code != 1 || !strings.Contains(errOut, "not a module (.wasm) or settings (.json) file") {
		t.Fatalf("sign a .txt: exit %d, %s", code, errOut)
	}
}
