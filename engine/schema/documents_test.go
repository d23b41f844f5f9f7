package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden documents in testdata/")

// obj is a decoded JSON object.
type obj = map[string]interface{}

func decode(t *testing.T, b []byte) obj {
	t.Helper()
	var m obj
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("document is not JSON: %v", err)
	}
	return m
}

// at walks a decoded document along keys; it fails the test when a key is missing.
func at(t *testing.T, v interface{}, keys ...string) interface{} {
	t.Helper()
	for i, k := range keys {
		m, ok := v.(obj)
		if !ok {
			t.Fatalf("%s is not an object", strings.Join(keys[:i], "/"))
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("missing %s", strings.Join(keys[:i+1], "/"))
		}
	}
	return v
}

func sortedKeys(v interface{}) []string {
	var out []string
	for k := range v.(obj) {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func v3Doc(t *testing.T, group, version string) obj {
	t.Helper()
	b, err := V3Document(group, version)
	if err != nil {
		t.Fatalf("V3Document(%q, %q): %v", group, version, err)
	}
	return decode(t, b)
}

func goldenName(path string) string {
	return "openapi-v3-" + strings.ReplaceAll(path, "/", "_") + ".json"
}

// TestGoldenDocuments pins every served document byte for byte. The v1 and
// v1beta1 goldens were checked to be identical to kube-apiserver 1.37.1's
// output; regenerate with `go test ./engine/schema/ -run Golden -update`
// and review the diff.
func TestGoldenDocuments(t *testing.T) {
	docs := map[string]func() ([]byte, error){"openapi-v2.json": V2Document}
	for _, p := range V3Paths() {
		p := p
		docs[goldenName(p)] = func() ([]byte, error) { return V3DocumentForPath(p) }
	}
	for name, get := range docs {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		file := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("reading golden (run with -update to create): %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (run with -update and review the diff)", name, file)
		}
	}
}

func TestDocumentsAreDeterministic(t *testing.T) {
	for _, p := range V3Paths() {
		a, errA := buildV3(p)
		b, errB := buildV3(p)
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v %v", p, errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("two builds of %s differ", p)
		}
	}
	a, errA := buildV2()
	b, errB := buildV2()
	if errA != nil || errB != nil {
		t.Fatalf("v2: %v %v", errA, errB)
	}
	if !bytes.Equal(a, b) {
		t.Error("two builds of the v2 document differ")
	}
	c, _ := V3Document(group, "v1")
	d, _ := V3Document(group, "v1")
	if !bytes.Equal(c, d) {
		t.Error("two V3Document calls differ")
	}
}

func TestV3Paths(t *testing.T) {
	want := []string{
		"api", "api/v1", "apis", "apis/coordination.k8s.io", "apis/coordination.k8s.io/v1",
		"apis/coordination.k8s.io/v1alpha2", "apis/coordination.k8s.io/v1beta1",
		"apis/events.k8s.io", "apis/events.k8s.io/v1", "version",
	}
	if got := V3Paths(); !reflect.DeepEqual(got, want) {
		t.Errorf("V3Paths() = %q, want %q", got, want)
	}
	for _, p := range want {
		if _, err := V3DocumentForPath(p); err != nil {
			t.Errorf("V3DocumentForPath(%q): %v", p, err)
		}
	}
}

func TestV3DocumentNotFound(t *testing.T) {
	for _, gv := range [][2]string{{group, "v2"}, {"apps", "v1"}, {"apps", ""}} {
		if _, err := V3Document(gv[0], gv[1]); !errors.Is(err, ErrNotFound) {
			t.Errorf("V3Document(%q, %q) error = %v, want ErrNotFound", gv[0], gv[1], err)
		}
	}
}

// TestRefsResolve checks that every $ref of every document points at a
// schema (or, in v2, a shared parameter) the document contains.
func TestRefsResolve(t *testing.T) {
	docs := map[string][]byte{}
	for _, p := range V3Paths() {
		b, err := V3DocumentForPath(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[p] = b
	}
	v2, err := V2Document()
	if err != nil {
		t.Fatal(err)
	}
	docs["v2"] = v2
	for name, b := range docs {
		doc := decode(t, b)
		refs := 0
		var walk func(v interface{})
		walk = func(v interface{}) {
			switch v := v.(type) {
			case obj:
				if ref, ok := v["$ref"].(string); ok {
					refs++
					parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
					var target interface{} = doc
					for _, p := range parts {
						m, _ := target.(obj)
						target = m[p]
					}
					if target == nil {
						t.Errorf("%s: $ref %q does not resolve", name, ref)
					}
				}
				for _, c := range v {
					walk(c)
				}
			case []interface{}:
				for _, c := range v {
					walk(c)
				}
			}
		}
		walk(doc)
		if refs == 0 {
			t.Errorf("%s has no $ref at all", name)
		}
	}
}
