package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/abi"
	"github.com/leasehold/leasehold/plugins/builtin"
)

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	// Write elsewhere and rename, as operators should: the poller never
	// sees a half-written module.
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func version(t *testing.T, h *Host, name string) string {
	t.Helper()
	s, ok := h.Lookup(name)
	if !ok {
		return ""
	}
	return s.Module().Version
}

// TestHotReload walks one file through its life: new, changed, a bad
// update (the good version keeps serving), fixed, removed.
func TestHotReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := quietHost(t, Options{Dir: dir})
	path := filepath.Join(dir, "hello.wasm")

	h.Scan(ctx)
	if v := version(t, h, "example.com/hello"); v != "" {
		t.Fatalf("served before it exists: %q", v)
	}
	writeFile(t, path, hello(t, "1"))
	h.Scan(ctx)
	if v := version(t, h, "example.com/hello"); v != "1" {
		t.Fatalf("new file: version %q", v)
	}
	old, _ := h.Lookup("example.com/hello")

	writeFile(t, path, hello(t, "2"))
	h.Scan(ctx)
	if v := version(t, h, "example.com/hello"); v != "2" {
		t.Fatalf("changed file: version %q", v)
	}
	// A strategy looked up before the swap was retired and closed; using
	// it fails cleanly (the controller falls back), it does not crash.
	if _, err := old.Decide(ctx, abi.SampleInput("example.com/hello")); err == nil {
		t.Fatalf("retired module: err = %v", err)
	}

	writeFile(t, path, []byte("\x00asm\x01\x00\x00\x00broken"))
	h.Scan(ctx)
	if v := version(t, h, "example.com/hello"); v != "2" {
		t.Fatalf("bad update replaced the good version: %q", v)
	}
	st := h.Modules()[1]
	if st.LoadError == "" || st.Version != "2" || !st.Active {
		t.Fatalf("status after bad update: %+v", st)
	}

	writeFile(t, path, hello(t, "3"))
	h.Scan(ctx)
	if v := version(t, h, "example.com/hello"); v != "3" {
		t.Fatalf("fixed file: version %q", v)
	}
	if st := h.Modules()[1]; st.LoadError != "" {
		t.Fatalf("load error not cleared: %+v", st)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.Scan(ctx)
	if _, ok := h.Lookup("example.com/hello"); ok {
		t.Fatal("removed file still served")
	}
	if n := len(h.Modules()); n != 1 {
		t.Fatalf("%d modules listed after removal", n)
	}
}

// TestRunPicksUpChanges: the poller, not a manual Scan, loads a file, and
// decisions keep succeeding on other goroutines while modules swap.
func TestRunPicksUpChanges(t *testing.T) {
	// Build the modules first: a build failure (wat2wasm missing) then
	// fails the test before any decision goroutine exists.
	versions := map[string][]byte{}
	for _, v := range []string{"1", "2", "3"} {
		versions[v] = hello(t, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	h := quietHost(t, Options{Dir: dir, PollInterval: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Deferred after Run's cancel, so it runs first: the decision
	// goroutines end before the host does, even when the test fails.
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := abi.SampleInput(abi.BuiltinStrategy)
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, _ := h.Lookup(abi.BuiltinStrategy)
				if _, err := s.Decide(ctx, in); err != nil {
					t.Errorf("decision during reload: %v", err)
					return
				}
				// The module being swapped: a Lookup never returns a
				// closed module (one retired after the lookup may fail).
				if s, ok := h.Lookup("example.com/hello"); ok {
					if _, err := s.Decide(ctx, in); err != nil && !strings.Contains(err.Error(), "unloaded") {
						t.Errorf("hello during reload: %v", err)
						return
					}
				}
			}
		}()
	}
	for _, v := range []string{"1", "2", "3"} {
		writeFile(t, filepath.Join(dir, "hello.wasm"), versions[v])
		waitFor(t, func() bool { return version(t, h, "example.com/hello") == v })
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOverrideBuiltin: a file may serve OldestEmulationVersion; Builtin
// still returns the embedded module, and removing the file restores it.
func TestOverrideBuiltin(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := quietHost(t, Options{Dir: dir})
	path := filepath.Join(dir, "my-oldest.wasm")
	// Same code, different file: enough to show which one serves.
	writeFile(t, path, builtin.Modules()[0].Wasm)
	h.Scan(ctx)
	s, _ := h.Lookup(abi.BuiltinStrategy)
	if s.Module().Builtin {
		t.Fatal("override not serving")
	}
	b, ok := h.Builtin(abi.BuiltinStrategy)
	if !ok || !b.Module().Builtin {
		t.Fatal("Builtin does not return the embedded module")
	}
	mods := h.Modules()
	if mods[0].Active || !mods[1].Active {
		t.Fatalf("Active flags: %+v", mods)
	}
	_ = os.Remove(path)
	h.Scan(ctx)
	if s, _ := h.Lookup(abi.BuiltinStrategy); !s.Module().Builtin {
		t.Fatal("built-in not restored after removal")
	}
}

// TestNameConflict: a second file may not serve a name another serves.
func TestNameConflict(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := quietHost(t, Options{Dir: dir})
	writeFile(t, filepath.Join(dir, "a.wasm"), hello(t, "a"))
	h.Scan(ctx)
	writeFile(t, filepath.Join(dir, "b.wasm"), hello(t, "b"))
	h.Scan(ctx)
	if v := version(t, h, "example.com/hello"); v != "a" {
		t.Fatalf("version %q serves, want the first file's", v)
	}
	if st := h.Modules()[2]; st.LoadError == "" {
		t.Fatalf("conflict not reported: %+v", st)
	}
}

func TestDirectoryCreated(t *testing.T) {
	data := t.TempDir()
	quietHost(t, Options{DataDir: data})
	for _, d := range []string{"plugins", "wasm-cache"} {
		if fi, err := os.Stat(filepath.Join(data, d)); err != nil || !fi.IsDir() {
			t.Fatalf("%s not created: %v", d, err)
		}
	}
}
