package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// TestE2EDocsCommands runs the shell commands of README.md's and
// docs/plugins.md's ```sh blocks as a reader would type them, in order,
// each file in a fresh directory, and requires exit status 0 from each.
//
// How a command runs:
//   - In a directory that mirrors the checkout (a symlink to each of its
//     top-level entries), so "./plugins/examples/..." and "-I plugins/sdk/c"
//     resolve as in a clone, and whatever the command writes
//     (leasehold-data/, newest.wasm) stays in the test's directory. HOME is
//     a fresh directory too (kubectl's cache); the Go caches are the
//     user's, so builds are warm.
//   - With bash -c, so pipes, redirections, "&&" and here-documents work as
//     written. "export NAME=VALUE" carries over to the commands after it.
//   - "leasehold" is the binary the e2e tests build from this checkout, on
//     PATH. Building it again would be the same binary for minutes of a
//     loaded machine, so "go run ." becomes "leasehold" and
//     "go build -o leasehold ." copies it to ./leasehold (by a rename, as
//     go build writes it).
//   - The server's default address 127.0.0.1:8080 becomes a free port
//     (other tests may run on this machine): LEASEHOLD_LISTEN names it and
//     "127.0.0.1:8080" in a command is rewritten to it. "$!" is the process
//     id of the last command started in the background.
//
// Commands that do not end by themselves run in the background and stay
// up until the file is done, as in a second terminal:
//   - a server ("leasehold serve", "./leasehold serve", "go run .", with
//     or without "&"): it stops the servers and background commands before
//     it (a reader runs one server at a time), and counts as started once
//     /readyz answers 200;
//   - a watch (-w, --watch) or "leasehold run": started once it printed
//     its first line on stdout (a watch's first state; run's command
//     started, so the lease was granted). Either may also exit, with 0.
//
// Files a command reads that the reader brings are written first:
// docsFixtures (a token file, the CA a TLS server would have generated,
// the docs' own example code and input). Commands that cannot run here are
// listed in docsSkips with the reason; every other command must run.
//
// A skip rule or fixture that no command uses fails the test, so that
// neither list outlives the text it was written for.
func TestE2EDocsCommands(t *testing.T) {
	testneeds.Slow(t, "runs every documented command, with kubectl, clang, npm and a wasm32 rustc (minutes)")
	t.Parallel() // mostly waits on compilers and servers it starts
	used := map[string]bool{}
	for _, doc := range []string{"README.md", "docs/plugins.md"} {
		t.Run(strings.ReplaceAll(doc, "/", "_"), func(t *testing.T) {
			for _, u := range runDocCommands(t, doc) {
				used[u] = true
			}
		})
	}
	if t.Failed() {
		return
	}
	for _, s := range docsSkips {
		if !used["skip:"+s.block+s.command] {
			t.Errorf("skip rule %q matches no command of the docs: remove it", s.block+s.command)
		}
	}
	for doc, fixtures := range docsFixtures {
		for _, f := range fixtures {
			if !used["fixture:"+f.path] {
				t.Errorf("%s: fixture %s is read by no command: remove it", doc, f.path)
			}
		}
	}
}

// docsSkip is a rule that leaves a command out: every command of a block
// that contains block, or a command that contains command.
type docsSkip struct {
	block, command string
	reason         string
}

var docsSkips = []docsSkip{
	{block: "make test", reason: "runs the whole suite, this test included, after installing Debian packages as root"},
	{block: "--server http://lease-server:8080", reason: "addresses the reader's server host lease-server; the worked example after it runs the same commands (run, leader) against a local server"},
	{block: "--cluster-init --cluster-token-file token", reason: "three cluster members at once on fixed ports (this runner keeps one server); web/e2e/cluster_test.go runs the same init, joins and cluster status on free ports"},
	{block: "--storage etcd", reason: "needs a three-member etcd cluster and its certificates (web/e2e/replicas_test.go runs replicas on a real etcd)"},
	{block: "apt install ./leasehold", reason: "installs a release package as root with systemd (make verify-dist and .ci/pkg-test check the package)"},
	{block: "tar xzf leasehold-", reason: "installs a release tarball as root with systemd (make verify-dist checks the tarball)"},
	{block: "docker build", reason: "needs Docker (the Dockerfile's build is part of make test)"},
	{block: "openssl pkeyutl -verify", reason: "checks a downloaded release with the maintainers' public key (make test's release step signs with a throwaway key and runs this check)"},
	{block: "leasehold-archive-keyring.gpg", reason: "adds a remote apt repository as root (make test checks a repository apt reads; make release-test installs and upgrades from one in a debootstrap root)"},
	{command: "bench ... ", reason: `"..." stands for the arguments of the line above, not something to type`},
	{command: "--token T --insecure-skip-tls-verify", reason: "addresses a kube-apiserver the reader runs (the README's side-by-side rows were measured so); the bench runs above run here"},
	{command: "docs/bench.sh", reason: "a benchmark of 12 scenarios × N runs (minutes); the single bench run above it runs here"},
	{command: "docs/soak.sh", reason: "a soak of ten minutes by design"},
	{command: "docs/cluster-bench.sh", reason: "builds the binary and starts three cluster members of its own for a benchmark run (minutes); the cluster tests run members here, the single bench run above runs here"},
	{command: "docs/wear.sh", reason: "minutes of renewals per run, as root on loop devices with their own ext4 file systems"},
	{command: "docs/footprint.sh", reason: "a 6-minute and a 10-minute idle wait by design"},
	{command: "--plugin-trust-keys /etc/leasehold/", reason: "a second server on the device's own trust file; web/e2e/plugin_signing_test.go runs serve with trust keys, signed and refused modules"},
}

// docsFixture is a file a command reads that the reader brings: written
// into the file's directory (unless there already) just before the first
// command containing trigger runs.
type docsFixture struct {
	path, trigger string
	content       func(t *testing.T, doc string) []byte
}

var docsFixtures = map[string][]docsFixture{
	"README.md": {
		// "leasehold kubeconfig --token-file device.token
		// --certificate-authority leasehold-data/pki/ca.crt": the reader's
		// token, and the CA that --tls-auto would have generated.
		{"device.token", "device.token", func(*testing.T, string) []byte { return []byte("REPLACE-WITH-A-LONG-RANDOM-TOKEN\n") }},
		{"leasehold-data/pki/ca.crt", "pki/ca.crt", func(t *testing.T, _ string) []byte { return testCAPEM(t) }},
	},
	"docs/plugins.md": {
		// "Writing a strategy in Go/C": the example is saved where its
		// build command runs (the Go one in a directory of its own, as
		// "go build ... ." builds the directory).
		{"mine-go/main.go", "-o mine.wasm .", func(t *testing.T, doc string) []byte {
			return docBlockAfter(t, doc, "## Writing a strategy in Go", "go")
		}},
		{"mine.c", "mine.c", func(t *testing.T, doc string) []byte { return docBlockAfter(t, doc, "## Writing a strategy in C", "c") }},
		// "leasehold plugin test mine.wasm input.json": the Input example.
		{"input.json", "input.json", func(t *testing.T, doc string) []byte { return docBlockAfter(t, doc, "## Input", "json") }},
	},
}

// docsWorkDir is where a command runs, relative to the file's directory,
// when not there: the Go example's build runs beside its source.
var docsWorkDir = map[string]string{
	"GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o mine.wasm .": "mine-go",
}

type docCommand struct {
	text string
	line int
}

// runDocCommands runs one file's commands and returns the skip rules
// ("skip:" and the rule's text) and fixtures ("fixture:" and the path) it
// used.
func runDocCommands(t *testing.T, doc string) (used []string) {
	root := moduleDir(t)
	data, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	bin := leaseholdBinary(t)

	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == "leasehold-data" || e.Name() == "leasehold" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "leasehold")); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	r := &docRunner{t: t, doc: doc, text: text, dir: dir, bin: bin, addr: addr, env: docEnv(t, binDir, addr),
		scriptAddr: freeLoopbackAddr(t), scratch: filepath.Join(t.TempDir(), "first-strategy")}
	defer r.stopBackground()

	ran := 0
	for _, block := range shellBlocks(text) {
		skipBlock := ""
		for _, s := range docsSkips {
			if s.block != "" && strings.Contains(block.text, s.block) {
				skipBlock = s.reason
				used = append(used, "skip:"+s.block)
			}
		}
		if scriptBlock.MatchString(block.text) && skipBlock == "" {
			// A block that keeps shell variables between its lines is
			// a script: it runs whole, in one shell.
			r.runToEnd(fmt.Sprintf("%s:%d: (script) %s", doc, block.line, firstLine(block.text)), r.dir, r.rewrite("set -eo pipefail\n"+block.text))
			ran++
			if t.Failed() {
				return used
			}
			continue
		}
		for _, c := range splitCommands(block) {
			reason := skipBlock
			for _, s := range docsSkips {
				if s.command != "" && strings.Contains(c.text, s.command) {
					reason = s.reason
					used = append(used, "skip:"+s.command)
				}
			}
			if reason != "" {
				t.Logf("%s:%d: not run (%s): %s", doc, c.line, reason, firstLine(c.text))
				continue
			}
			r.run(doc, c)
			ran++
			if t.Failed() {
				return used
			}
		}
	}
	if ran == 0 {
		t.Fatalf("%s: no command ran", doc)
	}
	t.Logf("%s: %d commands ran, each exited 0", doc, ran)

	if doc == "docs/plugins.md" {
		// Both "mine.wasm"s the docs build pass the checks; the C one is
		// what the Testing commands used.
		r.run(doc, docCommand{"leasehold plugin vet mine-go/mine.wasm", 0})
	}
	return append(used, r.fixturesWritten...)
}

// shellBlocks returns the ```sh blocks of a Markdown text, with the line
// of their first command.
func shellBlocks(text string) []docCommand {
	var blocks []docCommand
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		blocks = append(blocks, docCommand{strings.Join(lines[start:i], "\n"), start + 1})
	}
	return blocks
}

var heredocStart = regexp.MustCompile(`<<-?'?([A-Za-z_]+)'?`)

// splitCommands cuts a block into command lines: a line ending in "\"
// continues on the next, a here-document runs to its terminator, comment
// lines and blank lines are left out.
func splitCommands(block docCommand) []docCommand {
	var out []docCommand
	lines := strings.Split(block.text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		c := docCommand{line: block.line + i}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			c.text += line + "\n"
			i++
			line = lines[i]
		}
		c.text += line
		if m := heredocStart.FindStringSubmatch(c.text); m != nil {
			for i++; i < len(lines); i++ {
				c.text += "\n" + lines[i]
				if lines[i] == m[1] {
					break
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// docRunner runs one file's commands in its directory.
type docRunner struct {
	t          *testing.T
	doc, text  string // the file's name and content
	dir, bin   string
	addr       string
	env        []string
	background []*docProcess
	lastPID    int
	// fixturesWritten lists "fixture:" and the path of each written.
	fixturesWritten []string
	// scriptAddr and scratch stand in for the walkthrough's second
	// server address (127.0.0.1:18080) and its /tmp/first-strategy.
	scriptAddr, scratch string
}

// scriptBlock matches a block that assigns a shell variable at the start
// of a line.
var scriptBlock = regexp.MustCompile(`(?m)^[a-z_][a-z0-9_]*=`)

// rewrite points a script's fixed places at the test's own: its scratch
// directory, free ports, and the binary the tests built (instead of
// building it again).
func (r *docRunner) rewrite(text string) string {
	text = strings.ReplaceAll(text, "/tmp/first-strategy", r.scratch)
	text = strings.ReplaceAll(text, "127.0.0.1:18080", r.scriptAddr)
	text = strings.ReplaceAll(text, "go build -o "+r.scratch+"/leasehold .", "cp "+shellQuote(r.bin)+" "+r.scratch+"/leasehold")
	return text
}

type docProcess struct {
	cmd       *exec.Cmd
	what      string
	out       *syncWriter
	exited    chan struct{}
	firstLine chan struct{} // closed at its first line of stdout
}

var (
	serverCommand = regexp.MustCompile(`^(?:\./)?leasehold(?:$|\s+serve(?:\s|$)|\s+-)`)
	watchCommand  = regexp.MustCompile(`(?:\s-w|\s--watch)(?:\s|$)`)
	runCommand    = regexp.MustCompile(`^(?:\./)?leasehold run\s`)
	exportCommand = regexp.MustCompile(`^export ([A-Z_][A-Z0-9_]*)=`)
	commentTail   = regexp.MustCompile(`\s+#[^'"\n]*$`)
)

// run runs one command as the package comment describes.
func (r *docRunner) run(doc string, c docCommand) {
	t := r.t
	t.Helper()
	text := commentTail.ReplaceAllString(c.text, "")
	text = strings.ReplaceAll(r.rewrite(text), "127.0.0.1:8080", r.addr)
	// As go build, replace the file by a rename: ./leasehold may be running.
	text = strings.ReplaceAll(text, "go build -o leasehold .", "cp "+shellQuote(r.bin)+" .leasehold.new && mv -f .leasehold.new leasehold")
	if r.lastPID != 0 {
		text = strings.ReplaceAll(text, "$!", strconv.Itoa(r.lastPID))
	}
	where := fmt.Sprintf("%s:%d: %s", doc, c.line, firstLine(c.text))
	r.writeFixtures(text)
	dir := filepath.Join(r.dir, docsWorkDir[strings.TrimSpace(text)])

	background := strings.HasSuffix(strings.TrimSpace(text), "&")
	text = strings.TrimSuffix(strings.TrimSpace(text), "&")
	// "A && B &" runs A, then B in the background: A is a command of its own.
	parts := strings.Split(text, " && ")
	last := strings.TrimSpace(parts[len(parts)-1])
	if last == "go run ." {
		last = "leasehold"
	}
	server := serverCommand.MatchString(last) && !strings.Contains(last, "|")
	longRunning := server || background || (!strings.Contains(last, "<<") && (watchCommand.MatchString(last) || runCommand.MatchString(last)))
	if !longRunning {
		r.runToEnd(where, dir, text)
		return
	}
	if server {
		r.stopBackground()
	}
	for _, p := range parts[:len(parts)-1] {
		r.runToEnd(where, dir, p)
	}
	p := r.start(where, dir, last)
	if server {
		r.waitReady(where, p)
	} else {
		r.waitFirstLine(where, p)
	}
}

// writeFixtures writes the fixtures the command triggers.
func (r *docRunner) writeFixtures(command string) {
	t := r.t
	t.Helper()
	for _, f := range docsFixtures[r.doc] {
		p := filepath.Join(r.dir, f.path)
		if !strings.Contains(command, f.trigger) {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.content(t, r.text), 0o600); err != nil {
			t.Fatal(err)
		}
		r.fixturesWritten = append(r.fixturesWritten, "fixture:"+f.path)
	}
}

// runToEnd runs a command that ends by itself and requires exit status 0.
func (r *docRunner) runToEnd(where, dir, text string) {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script := text
	name := ""
	if m := exportCommand.FindStringSubmatch(text); m != nil {
		// The shell's own expansion of the value, carried to later
		// commands.
		name = m[1]
		script += "\nprintf '\\n%s' \"$" + name + "\""
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = dir, r.env
	var out syncWriter
	out.w = new(bytes.Buffer)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, &out), &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		t.Errorf("%s\nexit: %v after %v\noutput:\n%s%s", where, err, time.Since(start).Round(time.Millisecond), out.String(), r.backgroundLogs())
		return
	}
	if name != "" {
		s := stdout.String()
		r.env = append(r.env, name+"="+s[strings.LastIndexByte(s, '\n')+1:])
	}
	t.Logf("%s: exit 0 (%v)", where, time.Since(start).Round(time.Millisecond))
}

// start starts a long-running command in the background.
func (r *docRunner) start(where, dir, text string) *docProcess {
	t := r.t
	t.Helper()
	// exec: the process id is the command's own, for "$!" and signals.
	cmd := exec.Command("bash", "-c", "exec "+text)
	cmd.Dir, cmd.Env = dir, r.env
	cmd.SysProcAttr = childSysProcAttr()
	p := &docProcess{cmd: cmd, what: where, out: &syncWriter{w: new(bytes.Buffer)}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	r.background = append(r.background, p)
	r.lastPID = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	p.firstLine = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			fmt.Fprintln(p.out, sc.Text())
			if !seen {
				seen = true
				close(p.firstLine)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return p
}

// waitReady waits until the server the command started answers /readyz.
func (r *docRunner) waitReady(where string, p *docProcess) {
	t := r.t
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Errorf("%s: the server exited (%v) before it was ready; output:\n%s", where, p.cmd.ProcessState, p.out.String())
			return
		default:
		}
		if resp, err := client.Get("http://" + r.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("%s: serving on %s", where, r.addr)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: /readyz not 200 within 60s; output:\n%s", where, p.out.String())
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFirstLine waits until the command printed its first line of
// standard output, or exited with 0.
func (r *docRunner) waitFirstLine(where string, p *docProcess) {
	t := r.t
	t.Helper()
	select {
	case <-p.firstLine:
		t.Logf("%s: running, first output line seen", where)
	case <-p.exited:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s: exit %d; output:\n%s%s", where, code, p.out.String(), r.backgroundLogs())
		}
	case <-time.After(90 * time.Second):
		t.Errorf("%s: no output within 90s; output:\n%s%s", where, p.out.String(), r.backgroundLogs())
	}
}

// stopBackground ends the background commands (SIGTERM, as Ctrl-C in
// their terminal would: leasehold run releases its lease), then waits.
func (r *docRunner) stopBackground() {
	for _, p := range r.background {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range r.background {
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			r.t.Errorf("%s: still running 20s after SIGTERM; killed; output:\n%s", p.what, p.out.String())
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	r.background = nil
}

// backgroundLogs is what the background commands printed, for failures.
func (r *docRunner) backgroundLogs() string {
	var b strings.Builder
	for _, p := range r.background {
		fmt.Fprintf(&b, "\n--- background %s:\n%s", p.what, p.out.String())
	}
	return b.String()
}

// docEnv is the commands' environment: the test's, with leasehold first
// on PATH, a fresh HOME, the user's Go caches, and the server address.
func docEnv(t *testing.T, binDir, addr string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LEASEHOLD_") || strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		env = append(env, name+"="+strings.TrimSpace(string(out)))
	}
	// The docs build Rust with plain "rustc": a rustup toolchain earlier
	// on PATH may lack the wasm32 target that Debian's rustc (what make
	// deps installs) has, so the one with it comes first.
	if rustc, err := testneeds.RustcWasm32(); err == nil {
		if err := os.Symlink(rustc, filepath.Join(binDir, "rustc")); err != nil {
			t.Fatal(err)
		}
	}
	return append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir(), "LEASEHOLD_LISTEN="+addr,
		"GOTOOLCHAIN=local")
}

// docBlockAfter returns the first ```lang block after heading.
func docBlockAfter(t *testing.T, doc, heading, lang string) []byte {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("no heading %q", heading)
	}
	rest := doc[i:]
	open := "\n```" + lang + "\n"
	j := strings.Index(rest, open)
	if j < 0 {
		t.Fatalf("no ```%s block after %q", lang, heading)
	}
	body := rest[j+len(open):]
	k := strings.Index(body, "\n```")
	if k < 0 {
		t.Fatalf("unterminated ```%s block after %q", lang, heading)
	}
	return []byte(body[:k+1])
}

// testCAPEM is a self-signed CA certificate, as --tls-auto writes to
// <data-dir>/pki/ca.crt.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leasehold-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// freeLoopbackAddr returns a loopback address with a port free right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
