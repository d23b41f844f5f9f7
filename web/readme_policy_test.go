package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/web/auth"
)

// readmePolicy returns the example policy file of README.md's
// "Authorization" paragraph, as an operator would copy it.
func readmePolicy(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "**Authorization.**")
	if !ok {
		t.Fatal("README.md has no Authorization paragraph")
	}
	_, rest, ok = strings.Cut(rest, "```json\n")
	if !ok {
		t.Fatal("README.md's Authorization paragraph has no policy example")
	}
	policy, _, _ := strings.Cut(rest, "```")
	path := filepath.Join(t.TempDir(), "policy.jsonl")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadmePolicyGrantsWhatItSays checks the README's example policy
// against the sentence that explains it.
func TestReadmePolicyGrantsWhatItSays(t *testing.T) {
	policies, err := auth.LoadPolicyFile(readmePolicy(t))
	if err != nil {
		t.Fatal(err)
	}
	users := []auth.TokenEntry{
		{Token: "t-admin", User: auth.User{Name: "admin"}},
		{Token: "t-device", User: auth.User{Name: "device-7", Groups: []string{"devices"}}},
		{Token: "t-someone", User: auth.User{Name: "someone"}},
		{Token: "t-prom", User: auth.User{Name: "prometheus"}},
	}
	base, _ := startAuthorizingServer(t, users, policies, nil)
	edge := "/apis/coordination.k8s.io/v1/namespaces/edge/leases"
	for _, tc := range []struct {
		token, method, path string
		want                int
	}{
		{"t-admin", "GET", "/leasehold/v1/backup", 200},
		{"t-admin", "POST", "/apis/coordination.k8s.io/v1/namespaces/other/leases", 201},
		{"t-device", "POST", edge, 201},
		{"t-device", "GET", edge, 200},
		{"t-device", "GET", "/ui/api/v1/namespaces/edge/leases/x/decisions", 200},
		{"t-device", "GET", "/apis/coordination.k8s.io/v1/namespaces/other/leases", 403},
		{"t-device", "GET", "/ui/api/v1/namespaces/other/leases/x/decisions", 403},
		{"t-device", "GET", "/metrics", 403},
		{"t-device", "GET", "/leasehold/v1/backup", 403},
		{"t-someone", "GET", "/apis", 200},
		{"t-someone", "GET", "/api", 200},
		{"t-someone", "GET", "/apis/coordination.k8s.io/v1", 200},
		{"t-someone", "GET", "/openapi/v3", 200},
		{"t-someone", "GET", "/openapi/v2", 200},
		{"t-someone", "GET", "/version", 200},
		{"t-someone", "GET", edge, 403},
		{"t-someone", "GET", "/metrics", 403},
		{"t-someone", "GET", "/ui/api/v1/system", 403},
		{"t-someone", "GET", "/leasehold/v1/backup", 403},
		{"t-prom", "GET", "/metrics", 200},
		{"t-prom", "GET", edge, 403},
		{"t-prom", "GET", "/leasehold/v1/backup", 403},
	} {
		body := ""
		if tc.method == "POST" {
			body = `{"metadata":{"name":"x"}}`
		}
		if r := do(t, tc.method, base+tc.path, body, "Authorization: Bearer "+tc.token); r.code != tc.want {
			t.Errorf("%s %s with %s: %d, want %d: %.200s", tc.method, tc.path, tc.token, r.code, tc.want, r.body)
		}
	}
}
