package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbiddenDeps lists, per package prefix, what its non-test code must never
// reach, even transitively: the layering of DEVELOPERS.md and docs/architecture.md.
var forbiddenDeps = map[string][]string{
	module + "/engine": {
		"github.com/valyala/fasthttp", "go.etcd.io/bbolt", "github.com/tetratelabs/wazero",
		module + "/web", module + "/storage/", module + "/plugins/host",
		module + "/plugins/builtin", module + "/plugins/sdk", module + "/plugins/examples",
	},
	module + "/storage": {
		module + "/engine", module + "/web", module + "/plugins",
		"github.com/valyala/fasthttp", "github.com/tetratelabs/wazero", "k8s.io/",
	},
	// web reaches the storage contract only through engine (checked on
	// direct imports by forbiddenImports), and never a backend.
	module + "/web": {
		module + "/storage/", "go.etcd.io/bbolt", "github.com/tetratelabs/wazero",
	},
	// plugins (host, SDK, built-ins, examples) meet the election only
	// through the contract in plugins/abi.
	module + "/plugins": {module + "/engine", module + "/storage", module + "/web"},
	// The ABI is the one contract shared by host, guests and engine: stdlib only.
	module + "/plugins/abi": {"github.com/", "go.etcd.io/", "k8s.io/", "sigs.k8s.io/", module + "/engine", module + "/web", module + "/storage"},
	module + "/plugins/sdk": {"github.com/", "go.etcd.io/", "k8s.io/", "sigs.k8s.io/", module + "/engine", module + "/web", module + "/storage", module + "/plugins/host"},
}

// forbiddenImports lists, per package prefix, what its non-test code must
// not import directly.
var forbiddenImports = map[string][]string{
	module + "/web": {module + "/storage"},
}

// TestLayering fails when a package imports across the architecture's
// boundaries (engine knows nothing of HTTP, bbolt or wazero; storage knows
// nothing of Kubernetes; web never touches storage).
func TestLayering(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}} |{{range .Deps}} {{.}}{{end}}`, "./...")
	cmd.Dir = moduleDir(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkg := fields[0]
		var imports, deps []string
		for i, f := range fields[1:] {
			if f == "|" {
				imports, deps = fields[1:i+1], fields[i+2:]
				break
			}
		}
		for prefix, forbidden := range forbiddenImports {
			if pkg != prefix && !strings.HasPrefix(pkg, prefix+"/") {
				continue
			}
			for _, imp := range imports {
				for _, f := range forbidden {
					if matchesForbidden(imp, f) {
						t.Errorf("%s imports %s directly, which its layer forbids", pkg, imp)
					}
				}
			}
		}
		for prefix, forbidden := range forbiddenDeps {
			if pkg != prefix && !strings.HasPrefix(pkg, prefix+"/") {
				continue
			}
			checked++
			for _, dep := range deps {
				for _, f := range forbidden {
					if matchesForbidden(dep, f) {
						t.Errorf("%s depends on %s, which its layer forbids", pkg, dep)
					}
				}
			}
		}
	}
	if checked < 3 {
		t.Fatalf("checked only %d packages: the layering test no longer sees the tree", checked)
	}
}

// matchesForbidden reports whether dep is covered by a forbidden entry: an
// entry ending in "/" covers only packages below it (so "storage/" forbids the
// backends, not the contract); any other entry covers itself and below.
func matchesForbidden(dep, entry string) bool {
	if strings.HasPrefix(dep, module+"/") && !strings.HasPrefix(entry, module) {
		return false // generic entries such as "github.com/" mean third-party code
	}
	if strings.HasSuffix(entry, "/") {
		return strings.HasPrefix(dep, entry)
	}
	return dep == entry || strings.HasPrefix(dep, entry+"/")
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
	"k8s.io/client-go":                     true, // tests only, enforced below
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
	"github.com/chromedp/chromedp":         true, // web/ui browser tests only
	"github.com/chromedp/cdproto":          true, // web/ui browser tests only
	"go.uber.org/zap":                      true, // storage/etcd: the etcd client's logger, bridged to slog
	"github.com/VictoriaMetrics/metrics":   true, // web/metrics: /metrics in the Prometheus text format
}

// TestDirectDependencies keeps go.mod's direct requirements to the allowlist
// and client-go out of the server binary.
func TestDirectDependencies(t *testing.T) {
	root := moduleDir(t)
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join(root, "docs", "dependencies.md"))
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
	list := exec.Command("go", "list", "-deps", ".")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/client-go") || strings.HasPrefix(dep, "github.com/chromedp/") {
			t.Errorf("the server binary links %s; it is for tests only", dep)
		}
	}
}
