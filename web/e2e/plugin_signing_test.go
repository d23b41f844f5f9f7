package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// signedModule is the fields of a module status these tests read.
type signedModule struct {
	Name, File, SHA256, SignerKeyID, State, RefusedSHA256, LoadError string
	Active                                                           bool
}

func moduleByFile(t *testing.T, ts *testServer, file string) (signedModule, bool) {
	var st struct{ Modules []signedModule }
	uiGet(t, ts, "/ui/api/v1/system", &st)
	for _, m := range st.Modules {
		if filepath.Base(m.File) == file {
			return m, true
		}
	}
	return signedModule{}, false
}

// TestE2EPluginSigning is the operator's path of issue 16: make a key, sign
// the Go example module, serve with only that key trusted. The module
// written before its signature is refused, then loads when the signature
// arrives, and elects. An altered copy (same file, old signature), an
// unsigned module and one signed by a stranger's key are refused, each
// logged once with its reason, while elections go on with the previous
// good version; "leasehold plugin list" shows every state.
func TestE2EPluginSigning(t *testing.T) {
	testneeds.Slow(t, "builds a Go guest for wasip1")
	t.Parallel()    // mostly lease timers and polls
	go newestWasm() // overlap the slow build with key generation and start-up
	keys, plugins := t.TempDir(), t.TempDir()
	key := filepath.Join(keys, "fleet.key")

	code, out, errOut := runCLI(t, "plugin", "keygen", key)
	if code != 0 {
		t.Fatalf("plugin keygen: exit %d\n%s%s", code, out, errOut)
	}
	keyID := regexp.MustCompile(`key id ([0-9a-f]{16})`).FindStringSubmatch(out)
	if keyID == nil {
		t.Fatalf("plugin keygen printed no key id:\n%s", out)
	}
	if info, err := os.Stat(key); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v, mode %v", err, info.Mode())
	}
	if code, _, errOut := runCLI(t, "plugin", "keygen", key); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("second keygen over the same file: exit %d, %q", code, errOut)
	}
	stranger := filepath.Join(keys, "stranger.key")
	if code, out, errOut := runCLI(t, "plugin", "keygen", stranger); code != 0 {
		t.Fatalf("plugin keygen: exit %d\n%s%s", code, out, errOut)
	}

	wasm, err := newestWasm()
	if err != nil {
		t.Fatal(err)
	}
	// Sign in a staging directory, as a build machine would.
	staged := filepath.Join(keys, "newest-binary-version.wasm")
	if err := os.WriteFile(staged, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "plugin", "sign", "--key", key, staged); code != 0 || !strings.Contains(out, keyID[1]) {
		t.Fatalf("plugin sign: exit %d\n%s%s", code, out, errOut)
	}
	sig, err := os.ReadFile(staged + ".sig")
	if err != nil {
		t.Fatal(err)
	}

	ts := startServer(t, "--plugins-dir", plugins, "--plugin-trust-keys", key+".pub")

	// The module arrives before its signature: refused, then loaded.
	const file = "newest-binary-version.wasm"
	sum := installPlugin(t, plugins, file, wasm)
	eventually(t, time.Minute, "unsigned module refused", func() (bool, string) {
		m, ok := moduleByFile(t, ts, file)
		return ok && m.State == "refused: missing signature", m.State
	})
	installPlugin(t, plugins, file+".sig", sig)
	eventually(t, time.Minute, "signed module loaded", func() (bool, string) {
		m, ok := moduleByFile(t, ts, file)
		return ok && m.State == "loaded" && m.Active && m.SHA256 == sum && m.SignerKeyID == keyID[1], m.State
	})
	// The accepted statement is remembered in the data directory (0600),
	// whose missing state the first start reported once.
	state := filepath.Join(ts.DataDir, "plugin-sequences.json")
	eventually(t, 10*time.Second, "accepted sequence recorded", func() (bool, string) {
		b, err := os.ReadFile(state)
		return err == nil && strings.Contains(string(b), newestStrategy), string(b)
	})
	if info, err := os.Stat(state); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v (want 0600)", state, info, err)
	}
	if n := strings.Count(ts.Log(), "Strategy signature state is missing"); n != 1 {
		t.Errorf("the missing signature state logged %d times, want once:\n%s", n, ts.Log())
	}

	lt := &leaderTracker{leading: map[string]bool{}}
	const lease = "e2e-signed"
	members := map[string]*cleMember{}
	for _, v := range [][3]string{{"kcm-old", "1.31.0", "1.30.0"}, {"kcm-mid", "1.32.0", "1.32.0"}, {"kcm-new", "1.33.0", "1.31.0"}} {
		members[v[0]] = startMember(t, ts, lt, lease, v[0], v[1], v[2], newestStrategy)
	}
	if who := waitLeader(t, lt, 1, 30*time.Second); who != "kcm-new" {
		t.Fatalf("first leader = %s, want kcm-new (the signed module picks the newest binary)", who)
	}

	// Three refused modules: the served file altered in place (its old
	// signature no longer matches), an unsigned one and a stranger's.
	// A custom section keeps the altered copy a valid module: what
	// refuses it is the signature, not the checks.
	altered := append(append([]byte{}, wasm...), 0, 5, 4, 'e', 'v', 'i', 'l')
	alteredSum := installPlugin(t, plugins, file, altered)
	installPlugin(t, plugins, "unsigned.wasm", altered)
	strangers := filepath.Join(keys, "strangers.wasm")
	if err := os.WriteFile(strangers, altered, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "plugin", "sign", "--key", stranger, "--strategy", newestStrategy, strangers); code != 0 {
		t.Fatalf("plugin sign: exit %d\n%s%s", code, out, errOut)
	}
	strangerSig, _ := os.ReadFile(strangers + ".sig")
	installPlugin(t, plugins, "strangers.wasm", altered)
	installPlugin(t, plugins, "strangers.wasm.sig", strangerSig)
	eventually(t, 20*time.Second, "altered, unsigned and stranger's modules refused", func() (bool, string) {
		m, _ := moduleByFile(t, ts, file)
		u, _ := moduleByFile(t, ts, "unsigned.wasm")
		s, _ := moduleByFile(t, ts, "strangers.wasm")
		return m.State == "loaded" && m.SHA256 == sum && m.RefusedSHA256 == alteredSum && strings.HasPrefix(m.LoadError, "digest mismatch") &&
				u.State == "refused: missing signature" && strings.HasPrefix(s.State, "refused: untrusted key id"),
			m.State + " / " + m.LoadError + " / " + u.State + " / " + s.State
	})

	// Elections go on with the previous good version: the leader dies and
	// the module (by its original digest, no fallback) picks the next.
	members["kcm-new"].kill()
	if who := waitLeader(t, lt, 2, 30*time.Second); who != "kcm-mid" {
		t.Fatalf("leader after kcm-new died = %s, want kcm-mid", who)
	}
	l, err := clientset(t, restConfig(t, ts, wireJSON)).CoordinationV1().Leases("kube-system").Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations["leasehold.dev/elected-by-module"]; !strings.HasSuffix(got, "sha256:"+sum) || l.Annotations["leasehold.dev/election-fallback-from"] != "" {
		t.Errorf("re-election by %q (fallback %q), want the signed module sha256:%s", got, l.Annotations["leasehold.dev/election-fallback-from"], sum)
	}

	// "plugin list" through the kubeconfig (and --server) shows each state.
	code, table, errOut := runCLI(t, "plugin", "list", "--server", ts.URL, "--kubeconfig", ts.Kubeconfig)
	if code != 0 {
		t.Fatalf("plugin list: exit %d\n%s%s", code, table, errOut)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^NAME +VERSION +ABI +SHA256 +SIGNER +FILE +STATE +CALLS +ERRORS +P50 +P99$`),
		regexp.MustCompile(`(?m)^OldestEmulationVersion .* 1 +[0-9a-f]{12} +\(built-in\) +\(built-in\) +loaded `),
		regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(newestStrategy) + ` +1\.0\.0 +1 +` + sum[:12] + ` +` + keyID[1] + ` +` + file + ` +loaded +[1-9][0-9]* +0 +\S+ +\S+$`),
		regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(newestStrategy) + ` +- +- +` + alteredSum[:12] + ` +- +` + file + ` +refused: digest mismatch: .*\(previous version serving\)`),
		regexp.MustCompile(`(?m)^- +- +- +` + alteredSum[:12] + ` +- +unsigned\.wasm +refused: missing signature +0 +0 +- +-$`),
		regexp.MustCompile(`(?m)^- +- +- +` + alteredSum[:12] + ` +[0-9a-f]{16} +strangers\.wasm +refused: untrusted key id: [0-9a-f]{16} +0 +0 +- +-$`),
	} {
		if !want.MatchString(table) {
			t.Errorf("plugin list lacks %s:\n%s", want, table)
		}
	}

	// Each refusal was logged once, with its reason, although the
	// directory was rescanned many times since.
	log := ts.Log()
	for _, c := range []struct{ file, reason string }{
		{file, "missing signature"}, {file, "digest mismatch"}, {"unsigned.wasm", "missing signature"}, {"strangers.wasm", "untrusted key id"},
	} {
		re := regexp.MustCompile(`strategy module refused.*file=\S*/` + regexp.QuoteMeta(c.file) + ` .*reason="` + c.reason + `"`)
		if n := len(re.FindAllString(log, -1)); n != 1 {
			t.Errorf("refusal of %s (%s) logged %d times, want once; log:\n%s", c.file, c.reason, n, log)
		}
	}
}
