package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenFile(t *testing.T) {
	tokens, entries, err := LoadTokenFile(writeFile(t, "tok-a,alice,1,\"admins,ops\"\n,nobody,2\ntok-b,bob,3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || tokens.Len() != 2 {
		t.Fatalf("entries = %+v, want 2 (the empty token is skipped)", entries)
	}
	a := &Authenticator{Tokens: tokens}
	u, err := a.Authenticate([]byte("Bearer tok-a"), nil)
	if err != nil || u.Name != "alice" || u.UID != "1" || strings.Join(u.Groups, ",") != "admins,ops,system:authenticated" {
		t.Errorf("alice = %+v, %v", u, err)
	}
	if u, err := a.Authenticate([]byte("bearer tok-b"), nil); err != nil || u.Name != "bob" || len(u.Groups) != 1 {
		t.Errorf("bob (lower-case scheme) = %+v, %v", u, err)
	}
	for _, h := range []string{"", "Bearer ", "Bearer tok-c", "Basic dG9rLWE=", "tok-a"} {
		if _, err := a.Authenticate([]byte(h), nil); err != ErrUnauthorized {
			t.Errorf("Authorization %q: %v, want ErrUnauthorized", h, err)
		}
	}
	if u, err := (&Authenticator{}).Authenticate(nil, nil); err != nil || u.Name != AnonymousUser {
		t.Errorf("without authenticators: %+v, %v, want anonymous", u, err)
	}
	if _, _, err := LoadTokenFile(writeFile(t, "tok,alice\n")); err == nil || !strings.Contains(err.Error(), "at least 3 columns") {
		t.Errorf("two columns: %v", err)
	}
}

func requestInfo(method, uri string) RequestInfo {
	var a fasthttp.Args
	path, query, _ := strings.Cut(uri, "?")
	a.Parse(query)
	return NewRequestInfo(method, path, &a)
}

func TestRequestInfo(t *testing.T) {
	for _, c := range []struct {
		method, uri string
		want        RequestInfo
	}{
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", RequestInfo{IsResourceRequest: true, Verb: "get", APIGroup: "coordination.k8s.io", APIVersion: "v1", Namespace: "ns", Resource: "leases", Name: "x"}},
		{"GET", "/apis/coordination.k8s.io/v1/leases?watch=1", RequestInfo{IsResourceRequest: true, Verb: "watch", APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases"}},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases?fieldSelector=metadata.name%3Dy", RequestInfo{IsResourceRequest: true, Verb: "list", APIGroup: "coordination.k8s.io", APIVersion: "v1", Namespace: "ns", Resource: "leases", Name: "y"}},
		{"GET", "/apis/coordination.k8s.io/v1/watch/namespaces/ns/leases/z", RequestInfo{IsResourceRequest: true, Verb: "watch", APIGroup: "coordination.k8s.io", APIVersion: "v1", Namespace: "ns", Resource: "leases", Name: "z"}},
		{"DELETE", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIGroup: "coordination.k8s.io", APIVersion: "v1", Namespace: "ns", Resource: "leases"}},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", RequestInfo{IsResourceRequest: true, Verb: "create", APIGroup: "coordination.k8s.io", APIVersion: "v1", Namespace: "ns", Resource: "leases"}},
		{"GET", "/apis/coordination.k8s.io/v1", RequestInfo{Verb: "get"}},
		{"GET", "/metrics", RequestInfo{Verb: "get"}},
	} {
		got := requestInfo(c.method, c.uri)
		c.want.Path, _, _ = strings.Cut(c.uri, "?")
		if got != c.want {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.method, c.uri, got, c.want)
		}
	}
}

func TestABAC(t *testing.T) {
	pl, err := LoadPolicyFile(writeFile(t, `# comment

{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"alice","namespace":"*","resource":"*","apiGroup":"*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"viewers","readonly":true,"namespace":"edge","resource":"leases","apiGroup":"coordination.k8s.io"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"system:authenticated","readonly":true,"nonResourcePath":"/apis*"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	alice := User{Name: "alice", Groups: []string{AuthenticatedGroup}}
	viewer := User{Name: "v", Groups: []string{"viewers", AuthenticatedGroup}}
	for _, c := range []struct {
		u           User
		method, uri string
		allowed     bool
	}{
		{alice, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/a/leases/x", true},
		{alice, "GET", "/metrics", false}, // a resource policy never matches a path
		{viewer, "GET", "/apis/coordination.k8s.io/v1/namespaces/edge/leases", true},
		{viewer, "GET", "/apis/coordination.k8s.io/v1/namespaces/other/leases", false},
		{viewer, "PUT", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/x", false},
		{viewer, "GET", "/apis/coordination.k8s.io", true},
		{viewer, "POST", "/apis/coordination.k8s.io", false},
	} {
		if ok, reason := pl.Authorize(c.u, requestInfo(c.method, c.uri)); ok != c.allowed || (!ok && reason != "No policy matched.") {
			t.Errorf("%s %s %s: allowed %v (%q), want %v", c.u.Name, c.method, c.uri, ok, reason, c.allowed)
		}
	}
	if _, err := LoadPolicyFile(writeFile(t, `{"user":"alice"}`+"\n")); err == nil {
		t.Error("an unversioned (v0) policy was accepted")
	}
}
