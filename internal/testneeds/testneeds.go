package testneeds

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Missing is the error of a need that is not met: what is needed and how to
// get it. Code that looks for a tool once per test binary (a sync.OnceValues
// building an example) returns it, and the test hands it to Check.
type Missing struct {
	What string // "chromium", "root"
	Hint string // the command or step that provides it
}

func (m *Missing) Error() string { return "needs " + m.What + " (" + m.Hint + ")" }

// Check ends the test when err is, or wraps, a *Missing: skipped under
// -short, failed otherwise. Any other error (or nil) is left to the caller.
func Check(t testing.TB, err error) {
	t.Helper()
	var m *Missing
	if !errors.As(err, &m) {
		return
	}
	if testing.Short() {
		t.Skipf("%v; skipped by -short", m)
	}
	t.Fatalf("%v: the full suite runs every test, so install it (make deps installs everything) or run the fast tier, go test -short", m)
}

// Find returns the path of the program name on PATH, or a *Missing with
// hint, the command that installs it.
func Find(name, hint string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", &Missing{What: name, Hint: hint}
	}
	return p, nil
}

// Tool returns the path of the program name on PATH; when there is none
// the test is skipped under -short and fails otherwise.
func Tool(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := Find(name, hint)
	Check(t, err)
	return p
}

// ChromiumPath is where Debian's chromium package puts the browser the UI
// tests drive.
const ChromiumPath = "/usr/bin/chromium"

// Chromium returns ChromiumPath, or ends the test when it is missing.
func Chromium(t testing.TB) string {
	t.Helper()
	Check(t, ChromiumMissing())
	return ChromiumPath
}

// ChromiumMissing is nil when ChromiumPath is there, for code that starts
// one browser per test binary.
func ChromiumMissing() error {
	if _, err := exec.LookPath(ChromiumPath); err != nil {
		return &Missing{What: "chromium", Hint: "apt-get install -y chromium"}
	}
	return nil
}

// Kubectl returns the kubectl on PATH, or Debian's /usr/bin/kubectl, or
// ends the test.
func Kubectl(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	if p, err := exec.LookPath("/usr/bin/kubectl"); err == nil {
		return p
	}
	Check(t, &Missing{What: "kubectl", Hint: "apt-get install -y kubernetes-client"})
	return ""
}

// Wat2wasm returns wabt's wat2wasm, or ends the test.
func Wat2wasm(t testing.TB) string {
	t.Helper()
	return Tool(t, "wat2wasm", "apt-get install -y wabt")
}

// Clang returns clang for WebAssembly builds (with lld's wasm-ld beside
// it), or ends the test.
func Clang(t testing.TB) string {
	t.Helper()
	p, err := FindClang()
	Check(t, err)
	return p
}

// FindClang is Clang for code that builds once per test binary.
func FindClang() (string, error) {
	clang, err := Find("clang", "apt-get install -y clang lld")
	if err != nil {
		return "", err
	}
	if _, err := Find("wasm-ld", "apt-get install -y lld"); err != nil {
		return "", err
	}
	return clang, nil
}

// Root ends the test unless it runs as root; why says what root is for
// (mounting a tmpfs, network namespaces).
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Check(t, &Missing{What: "root", Hint: why + "; run the suite as root"})
	}
}

// Slow skips the test under -short: it fits the full suite's budget but
// not the fast tier's (a few minutes for everything on a laptop). why says
// what takes the time.
func Slow(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs time: %s; skipped by -short", why)
	}
}

// RustcWasm32 returns the first rustc on PATH that has the
// wasm32-unknown-unknown standard library, or a *Missing. A rustup
// toolchain earlier on PATH may lack the target while Debian's rustc (with
// libstd-rust-dev-wasm32, what make deps installs beside it) has it.
func RustcWasm32() (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		rustc := filepath.Join(dir, "rustc")
		if st, err := os.Stat(rustc); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			continue
		}
		out, err := exec.Command(rustc, "--print", "target-libdir", "--target", "wasm32-unknown-unknown").Output()
		if err != nil {
			continue
		}
		if st, err := os.Stat(strings.TrimSpace(string(out))); err == nil && st.IsDir() {
			return rustc, nil
		}
	}
	return "", &Missing{What: "a rustc with the wasm32-unknown-unknown target on PATH",
		Hint: "apt-get install -y rustc libstd-rust-dev-wasm32 lld, or rustup target add wasm32-unknown-unknown"}
}
