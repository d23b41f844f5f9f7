//go:build unix

package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/plugins/signature"
)

// TestPluginDirFIFO: FIFOs named like a module, its settings and its
// signature are refused unopened. In the hostile review an unsigned FIFO
// x.wasm, opened while the scanner held the host's lock, hung /readyz,
// /metrics, the UI's system page, every later load and SIGTERM.
func TestPluginDirFIFO(t *testing.T) {
	for _, signed := range []bool{false, true} {
		name := "no trust keys"
		if signed {
			name = "trust keys"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir}
			hello := filepath.Join(dir, "hello.wasm")
			if err := os.WriteFile(hello, hello1(t), 0o644); err != nil {
				t.Fatal(err)
			}
			if signed {
				key, _ := signingKey(t, t.TempDir(), "k.key")
				signFile(t, key, hello)
				ring, err := signature.LoadKeyring(key + signature.PublicKeySuffix)
				if err != nil {
					t.Fatal(err)
				}
				opts.TrustKeys = ring
			}
			// A FIFO module, a FIFO module with a FIFO signature, and a
			// FIFO settings file beside a good module.
			for _, f := range []string{"x.wasm", "y.wasm", "y.wasm.sig", "hello.json"} {
				if err := syscall.Mkfifo(filepath.Join(dir, f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h := quietHost(t, opts)
			scanned := make(chan struct{})
			go func() {
				h.Scan(context.Background())
				close(scanned)
			}()
			select {
			case <-scanned:
			case <-time.After(30 * time.Second):
				// Health, the module list and shutdown must answer even so.
				_ = h.Ready()
				_ = h.Modules()
				t.Fatal("Scan hung on a FIFO")
			}
			for _, f := range []string{"x.wasm", "y.wasm"} {
				st := fileStatus(t, h, filepath.Join(dir, f))
				if !strings.Contains(st.LoadError, "not a regular file") || !strings.Contains(st.LoadError, "FIFO") || st.Active {
					t.Fatalf("%s: %+v, want it refused as a FIFO", f, st)
				}
			}
			// hello.json is a FIFO: hello.wasm is refused for it, not hung.
			if st := fileStatus(t, h, hello); !strings.Contains(st.LoadError, "hello.json") || !strings.Contains(st.LoadError, "FIFO") || st.Active {
				t.Fatalf("hello.wasm with a FIFO hello.json: %+v", st)
			}
			if err := h.Ready(); err != nil {
				t.Fatal(err)
			}
			// Without the FIFO settings file the module serves.
			if err := os.Remove(filepath.Join(dir, "hello.json")); err != nil {
				t.Fatal(err)
			}
			h.Scan(context.Background())
			if _, ok := h.Lookup("example.com/hello"); !ok {
				t.Fatalf("hello not served once its FIFO settings were gone: %+v", h.Modules())
			}
			closed := make(chan error, 1)
			go func() { closed <- h.Close(context.Background()) }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Close hung")
			}
		})
	}
}

// TestPluginDirSymlinks: a symbolic link in the plugins directory is
// refused unless the operator allows links (FollowSymlinks).
func TestPluginDirSymlinks(t *testing.T) {
	elsewhere := filepath.Join(t.TempDir(), "hello.wasm")
	if err := os.WriteFile(elsewhere, hello1(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, follow := range []bool{false, true} {
		dir := t.TempDir()
		link := filepath.Join(dir, "hello.wasm")
		if err := os.Symlink(elsewhere, link); err != nil {
			t.Fatal(err)
		}
		h := quietHost(t, Options{Dir: dir, FollowSymlinks: follow})
		h.Scan(context.Background())
		_, served := h.Lookup("example.com/hello")
		st := fileStatus(t, h, link)
		if follow != served {
			t.Fatalf("FollowSymlinks=%v: served=%v, status %+v", follow, served, st)
		}
		if !follow && !strings.Contains(st.LoadError, "symbolic link") {
			t.Fatalf("refused link not reported: %+v", st)
		}
	}
}

func hello1(t *testing.T) []byte { return hello(t, "1") }
