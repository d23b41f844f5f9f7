package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// This file is the one place that states leasehold's architecture as rules;
// docs/architecture.md draws the same picture for readers. A change that
// needs a new arrow changes a rule here, with its reason, and the drawing.
//
// It lives in the root package, which links no test-only library, so it
// runs without compiling client-go or the end-to-end suites.

const module = "github.com/leasehold/leasehold"

// layerRule forbids the packages matched by pkgs from reaching deny, except
// what allow names, with the reason a reviewer needs to judge a change that
// trips it.
//
// Patterns name module packages relative to the module: "engine" is that
// package, "engine/..." the package and everything below it, "." the
// leasehold command. A deny entry is such a pattern, a third-party path
// ("go.etcd.io/bbolt" and below, or a prefix ending in "/" such as
// "k8s.io/"), or "thirdparty" for anything outside the standard library and
// this module.
type layerRule struct {
	pkgs  []string
	deny  []string
	allow []string
	// direct limits the rule to direct imports; otherwise every package
	// the non-test code links counts.
	direct bool
	why    string
}

// serverPackages are web's server side, clientPackages its client side.
// web/kubeconfig is a leaf both sides may use; storage/cluster/clusterapi
// is the cluster's wire contract, which the server, its clients and the
// member share. internal/ holds the leaves that sit outside the four
// layers, which any of them may use (the top level is otherwise the design
// card's: main.go, engine, storage, plugins, web): internal/cli,
// internal/datadir, internal/pki, internal/buildversion and
// internal/clockcheck, and the
// test-only internal/testneeds.
// Their own rules keep them leaves, each apart from the others.
var (
	serverPackages = []string{"web", "web/apiserver/...", "web/auth/...", "web/metrics/...", "web/ui/...", "web/security/...", "web/sdnotify/...", "web/flowcontrol/..."}
	clientPackages = []string{"web/client/..."}
)

var layerRules = []layerRule{
	{pkgs: []string{"engine/..."}, deny: []string{"web/...", "storage/boltdb/...", "storage/etcd/...", "storage/backend/...", "plugins/host/...", "plugins/builtin/...", "plugins/sdk/...", "plugins/examples/...",
		"github.com/valyala/fasthttp", "go.etcd.io/bbolt", "github.com/tetratelabs/wazero"},
		why: "engine holds Kubernetes semantics, the stored format and the election; it knows nothing of HTTP, bbolt or wazero, so each can be replaced and engine tested alone"},
	{pkgs: []string{"storage/..."}, deny: []string{"engine/...", "web/...", "plugins/...", "k8s.io/", "github.com/valyala/fasthttp", "github.com/tetratelabs/wazero"},
		why: "storage is an etcd-shaped key-value contract: it stores bytes and knows nothing of Kubernetes objects, the web server or strategies; no arrow runs back up into web"},
	{pkgs: []string{"plugins/abi"}, deny: []string{"thirdparty", "engine/...", "web/...", "storage/...", "plugins/host/...", "plugins/sdk/..."},
		why: "the strategy contract is shared by the host, the guest SDK (built for wasip1) and the election: standard library only, like wazero's api package"},
	{pkgs: []string{"plugins/signature"}, deny: []string{"thirdparty", "engine/...", "web/...", "storage/...", "plugins/host/...", "plugins/sdk/..."},
		why: "module signatures are checked before wazero sees a byte of the module: standard library crypto only, so the check is small enough to audit"},
	{pkgs: []string{"plugins/status"}, deny: []string{"thirdparty", "engine/...", "web/...", "storage/...", "plugins/host/...", "plugins/sdk/..."},
		why: "the host's report of its modules is shown by the web server, which must not link the WASM runtime: standard library only"},
	{pkgs: []string{"plugins/sdk/..."}, deny: []string{"thirdparty", "engine/...", "web/...", "storage/...", "plugins/host/..."},
		why: "the guest SDK compiles to WebAssembly: it may use only the contract and the standard library"},
	{pkgs: []string{"plugins/..."}, deny: []string{"engine/...", "storage/...", "web/...", "k8s.io/", "sigs.k8s.io/", "go.etcd.io/"},
		why: "strategies and their wazero host implement plugins/abi's contract; engine, storage, web and the Kubernetes libraries have no place in a strategy runner or its tests"},
	{pkgs: serverPackages, deny: []string{"storage/boltdb/...", "storage/etcd/...", "storage/backend/...", "go.etcd.io/bbolt", "github.com/tetratelabs/wazero"},
		why: "web serves HTTP: backends and the WASM runtime are wired by main, never imported by web"},
	{pkgs: serverPackages, deny: []string{"storage/..."}, direct: true, allow: []string{"storage/cluster/clusterapi"},
		why: "the server reaches storage only through engine's contract, and the cluster's only through its wire contract (the membership it serves is handed to it)"},
	{pkgs: serverPackages, deny: clientPackages,
		why: "the server does not depend on client tools; what both need (the kubeconfig renderer) is a shared leaf"},
	{pkgs: clientPackages, deny: append([]string{"engine/...", "storage/...", "plugins/..."}, serverPackages...), allow: []string{"storage/cluster/clusterapi"},
		why: "client tools talk to a server over the wire as any Kubernetes client would; sharing the server's internals would hide wire incompatibilities"},
	{pkgs: []string{"internal/cli"}, deny: []string{"thirdparty", "web/...", "engine/...", "storage/...", "plugins/...", "internal/datadir", "internal/pki", "internal/testneeds"},
		why: "the flag helper is shared by commands on every layer, so it must be a leaf: standard library only"},
	{pkgs: []string{"internal/datadir"}, deny: []string{"thirdparty", "web/...", "engine/...", "storage/...", "plugins/...", "internal/cli", "internal/pki", "internal/testneeds"},
		why: "the data directory's layout is read by the server, its storage, the cluster member and the offline commands and clients, so it must be a leaf: standard library only"},
	{pkgs: []string{"web/kubeconfig"}, deny: []string{"web/...", "engine/...", "storage/...", "plugins/...", "k8s.io/", "github.com/"},
		allow: []string{"web/kubeconfig"},
		why:   "the kubeconfig renderer is shared by the server (which writes one at start) and the clients, so it must be a leaf"},
	{pkgs: []string{"storage/cluster/clusterapi"}, deny: []string{"thirdparty", "web/...", "engine/...", "storage/...", "plugins/...", "internal/..."},
		allow: []string{"storage/cluster/clusterapi"},
		why:   "the cluster's wire contract (join handshake, status, errors) is shared by the member, the joiner, the web server and \"leasehold cluster\", which must agree on every byte, so it must be a leaf: standard library only"},
	{pkgs: []string{"internal/buildversion"}, deny: []string{"thirdparty", "web/...", "engine/...", "storage/...", "plugins/...", "internal/cli", "internal/datadir", "internal/pki", "internal/testneeds"},
		why: "the version strings are read by the composition root and may be by any command, so they must be a leaf: standard library only"},
	{pkgs: []string{"internal/pki"}, deny: []string{"thirdparty", "web/...", "engine/...", "storage/...", "plugins/...", "internal/cli", "internal/datadir", "internal/testneeds"},
		why: "certificates are issued by the web server (--tls-auto) and by the cluster's CA (storage/cluster), so the issuer must be a leaf: standard library crypto only"},
	{pkgs: []string{"internal/clockcheck"}, deny: []string{"thirdparty", "web/...", "engine/...", "storage/...", "plugins/...", "internal/cli", "internal/datadir", "internal/pki", "internal/testneeds"},
		why: "the wait for a set wall clock runs before the server, its storage or a cluster member start, so it must be a leaf: standard library only"},
	{pkgs: []string{"."}, deny: []string{"k8s.io/client-go", "github.com/chromedp/"},
		why: "client-go and chromedp are for tests only; the server binary stays small (Prometheus' client and parser come in with the embedded etcd server, which registers its metrics with them)"},
}

// goPackage is what the rules need of `go list`.
type goPackage struct {
	path     string
	imports  []string
	deps     []string
	standard map[string]bool
}

// listPackages runs go list once over the module and returns each package's
// direct imports and transitive dependencies (non-test code).
func listPackages(t *testing.T) (map[string]goPackage, map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if .Standard}}std {{.ImportPath}}{{else}}pkg {{.ImportPath}}{{range .Imports}} {{.}}{{end}} |{{range .Deps}} {{.}}{{end}}{{end}}`, "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]goPackage{}
	std := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if f[0] == "std" {
			std[f[1]] = true
			continue
		}
		if f[1] != module && !strings.HasPrefix(f[1], module+"/") {
			continue
		}
		p := goPackage{path: f[1]}
		rest := f[2:]
		for i, s := range rest {
			if s == "|" {
				p.imports, p.deps = rest[:i], rest[i+1:]
				break
			}
		}
		pkgs[p.path] = p
	}
	return pkgs, std
}

// matchesPkg reports whether the module package path is covered by pattern.
func matchesPkg(path, pattern string) bool {
	if pattern == "." {
		return path == module
	}
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == module+"/"+tree || strings.HasPrefix(path, module+"/"+tree+"/")
	}
	return path == module+"/"+pattern
}

// thirdParty reports whether a deny entry names code outside the module.
func thirdParty(entry string) bool {
	return entry == "thirdparty" || strings.Contains(strings.SplitN(entry, "/", 2)[0], ".")
}

// denied reports whether dep is covered by the deny entry.
func denied(dep, entry string, std map[string]bool) bool {
	internal := dep == module || strings.HasPrefix(dep, module+"/")
	switch {
	case entry == "thirdparty":
		return !internal && !std[dep]
	case thirdParty(entry):
		if internal {
			return false
		}
		if strings.HasSuffix(entry, "/") {
			return strings.HasPrefix(dep, entry)
		}
		return dep == entry || strings.HasPrefix(dep, entry+"/")
	default:
		return internal && matchesPkg(dep, entry)
	}
}

// allowed reports whether dep is one of a rule's exceptions.
func allowed(dep string, allow []string) bool {
	for _, a := range allow {
		if matchesPkg(dep, a) {
			return true
		}
	}
	return false
}

// TestLayering checks every rule against the packages as they are.
func TestLayering(t *testing.T) {
	pkgs, std := listPackages(t)
	for _, r := range layerRules {
		for _, pattern := range r.pkgs {
			subjects := 0
			for _, p := range pkgs {
				if !matchesPkg(p.path, pattern) {
					continue
				}
				subjects++
				reach := p.deps
				if r.direct {
					reach = p.imports
				}
				for _, entry := range r.deny {
					var hits []string
					for _, dep := range reach {
						if denied(dep, entry, std) && !allowed(dep, r.allow) {
							hits = append(hits, dep)
						}
					}
					if len(hits) > 0 {
						t.Errorf("%s reaches %s (%d packages, first %s), which the rule for %s forbids: %s",
							p.path, entry, len(hits), hits[0], pattern, r.why)
					}
				}
			}
			// A rule that no longer matches anything protects nothing: the
			// package moved, and the rule and docs/architecture.md follow it.
			if subjects == 0 {
				t.Errorf("layering rule for %q matches no package: update the rules and docs/architecture.md", pattern)
			}
		}
		for _, entry := range r.deny {
			if thirdParty(entry) {
				continue
			}
			found := false
			for path := range pkgs {
				found = found || matchesPkg(path, entry)
			}
			if !found {
				t.Errorf("a layering rule forbids %q, which no longer exists: update the rule", entry)
			}
		}
	}
}

// allowedDirectDeps are the modules go.mod may require directly; each has
// its reason in docs/dependencies.md.
var allowedDirectDeps = map[string]bool{
	"github.com/valyala/fasthttp":          true,
	"go.etcd.io/bbolt":                     true,
	"github.com/goccy/go-json":             true,
	"github.com/tetratelabs/wazero":        true,
	"k8s.io/api":                           true,
	"k8s.io/apimachinery":                  true,
	"k8s.io/client-go":                     true, // tests only, enforced by TestLayering
	"k8s.io/kube-openapi":                  true,
	"k8s.io/utils":                         true,
	"sigs.k8s.io/structured-merge-diff/v6": true,
	"sigs.k8s.io/json":                     true,
	"sigs.k8s.io/yaml":                     true,
	"github.com/google/uuid":               true,
	"gopkg.in/evanphx/json-patch.v4":       true,
	"golang.org/x/sys":                     true,
	"go.etcd.io/etcd/client/v3":            true, // storage/etcd
	"go.etcd.io/etcd/api/v3":               true, // storage/etcd: etcd's error values
	"go.etcd.io/etcd/server/v3":            true, // storage/cluster: the embedded etcd member
	"go.etcd.io/etcd/client/pkg/v3":        true, // storage/cluster: the member's TLS files (transport.TLSInfo)
	"go.etcd.io/etcd/etcdutl/v3":           true, // storage/cluster: restoring a snapshot as a new cluster (snapshot.Restore)
	"go.etcd.io/raft/v3":                   true, // storage/cluster: raftpb's message type, to stand for election off a slow leader (linked by etcd's server)
	"github.com/chromedp/chromedp":         true, // web/ui and web/e2e browser tests only
	"github.com/chromedp/cdproto":          true, // web/ui and web/e2e browser tests only
	"go.uber.org/zap":                      true, // storage/etcd: the etcd client's logger, bridged to slog
	"google.golang.org/grpc":               true, // storage/etcd: the etcd client's gRPC error codes (failover)
	"github.com/VictoriaMetrics/metrics":   true, // web/metrics: /metrics in the Prometheus text format
	"github.com/prometheus/common":         true, // e2e tests only: Prometheus' own parser reads /metrics
	"github.com/anishathalye/porcupine":    true, // e2e tests only: linearizability of a lease's history on a cluster
	"k8s.io/klog/v2":                       true, // e2e tests only: client-go's log, discarded there unless -v
	"github.com/go-logr/logr":              true, // e2e tests only: the discarding logger klog is given
	"github.com/google/gnostic-models":     true, // web/apiserver: /openapi/v2 as protobuf
	"google.golang.org/protobuf":           true, // web/apiserver: /openapi/v2 as protobuf (proto.Marshal)
}

// TestDirectDependencies keeps go.mod's direct requirements to the allowlist,
// each with its reason in docs/dependencies.md.
func TestDirectDependencies(t *testing.T) {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("docs/dependencies.md")
	if err != nil {
		t.Fatal(err)
	}
	direct := 0
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "require"))
		f := strings.Fields(line)
		if len(f) < 2 || strings.Contains(line, "// indirect") || !strings.Contains(f[0], ".") {
			continue
		}
		if rel, ours := strings.CutPrefix(f[0], module+"/"); ours {
			// Our own nested modules (plugins/abi, plugins/sdk): not third
			// party, but they must build from this checkout, never from a
			// published version that may lag behind.
			if f[1] != "=>" && !strings.Contains(string(data), f[0]+" => ./"+rel+"\n") {
				t.Errorf("go.mod requires our nested module %s without `replace %s => ./%s`", f[0], f[0], rel)
			}
			continue
		}
		direct++
		if !allowedDirectDeps[f[0]] {
			t.Errorf("go.mod requires %s directly; it is not on the allowlist (add it with a reason to docs/dependencies.md)", f[0])
		}
		if !strings.Contains(string(docs), f[0]) {
			t.Errorf("docs/dependencies.md does not give a reason for %s", f[0])
		}
	}
	if direct == 0 {
		t.Fatal("found no direct requirements in go.mod")
	}
}

// TestTopLevel keeps the tree's top level to the design card's: the
// command's files, the four layers, internal/ for the leaves outside them,
// and the project's own directories (CI, docs, test data).
func TestTopLevel(t *testing.T) {
	allowedDirs := map[string]bool{"engine": true, "storage": true, "plugins": true, "web": true, "internal": true,
		".ci": true, "docs": true, "testdata": true}
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, _, nested := strings.Cut(f, "/")
		if nested && !allowedDirs[dir] && !seen[dir] {
			seen[dir] = true
			t.Errorf("top-level directory %s/ is not one of the design card's (engine, storage, plugins, web; internal/ for leaves outside the layers; .ci, docs, testdata)", dir)
		}
	}
}

// maxRootLines bounds the composition root's non-test files together
// (issue 25): the root parses flags and wires packages; logic that grows
// here belongs in the package that owns its work.
const maxRootLines = 600

// TestRootPackageSize keeps the root package's non-test files, together,
// at most maxRootLines long.
func TestRootPackageSize(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total, sizes := 0, []string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(data), "\n")
		total += n
		sizes = append(sizes, fmt.Sprintf("%s %d", name, n))
	}
	if total == 0 {
		t.Fatal("found no non-test Go files: the test runs in the repository's root")
	}
	if total > maxRootLines {
		t.Errorf("the root package's non-test files are %d lines (%s), over %d: move what is not wiring to the package that owns it",
			total, strings.Join(sizes, ", "), maxRootLines)
	}
}

// maxFunctionLines bounds every non-test function of the tree (issue 25):
// a function longer than this does several things, and the next feature
// makes it longer still; split it where its comments already say "then".
const maxFunctionLines = 120

// TestFunctionLength keeps every function (and function literal) of the
// non-test code, the nested modules included, at most maxFunctionLines
// long, from its declaration to its closing brace.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			var name string
			switch fn := n.(type) {
			case *ast.FuncDecl:
				body, name = fn.Body, fn.Name.Name
			case *ast.FuncLit:
				body, name = fn.Body, "a function literal"
			}
			if body == nil {
				return true
			}
			start := fset.Position(n.Pos())
			if lines := fset.Position(body.End()).Line - start.Line + 1; lines > maxFunctionLines {
				t.Errorf("%s:%d: %s is %d lines long, over %d: split it (the layout rules of issue 25)", start.Filename, start.Line, name, lines, maxFunctionLines)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("found no non-test Go files: the test runs in the repository's root")
	}
}
