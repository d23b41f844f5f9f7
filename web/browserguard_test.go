package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/auth"
)

// TestBrowserGuard: without credentials, the requests a web page can make
// are refused with kube-apiserver Status errors, and tools are served;
// with credentials nothing changes (a device reached as pi.local).
func TestBrowserGuard(t *testing.T) {
	open := startServer(t, func(o *web.Options) { o.AllowedHosts = []string{"leasehold.example:8080", ".fleet.example"} })
	tokens := auth.NewTokens([]auth.TokenEntry{{Token: "t", User: auth.User{Name: "alice", Groups: []string{"system:authenticated"}}}})
	authed := startServer(t, func(o *web.Options) { o.Auth = &auth.Authenticator{Tokens: tokens} })
	leases := "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	lease := func(name string) string {
		return `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `"},"spec":{"holderIdentity":"h"}}`
	}
	send := func(base, method, path, host, body string, hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for _, h := range hdr {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	self := strings.TrimPrefix(open, "http://")
	for _, c := range []struct {
		name, method, host, body string
		hdr                      []string
		code                     int
		msg                      string
	}{
		{"tool, JSON", "POST", "", lease("a"), []string{"Content-Type: application/json"}, 201, ""},
		{"tool, no Content-Type (JSON, as kube-apiserver)", "POST", "", lease("b"), nil, 201, ""},
		{"localhost", "POST", "localhost:1", lease("c"), []string{"Content-Type: application/json"}, 201, ""},
		{"allowed host", "POST", "leasehold.example:8080", lease("d"), []string{"Content-Type: application/json"}, 201, ""},
		{"allowed subdomain", "GET", "pi.fleet.example", "", nil, 200, ""},
		{"same origin", "POST", "", lease("e"), []string{"Content-Type: application/json", "Origin: http://" + self, "Sec-Fetch-Site: same-origin"}, 201, ""},
		{"rebound name", "GET", "attacker.example:" + strings.Split(self, ":")[1], "", nil, 403, `the Host header \"attacker.example:`},
		{"rebound name, write", "POST", "evil.example", lease("f"), []string{"Content-Type: application/json"}, 403, "DNS rebinding"},
		{"cross-site", "POST", "", lease("g"), []string{"Content-Type: application/json", "Sec-Fetch-Site: cross-site"}, 403, "a cross-site request"},
		{"same-site", "DELETE", "", "", []string{"Sec-Fetch-Site: same-site"}, 403, "a same-site request"},
		{"foreign origin", "POST", "", lease("h"), []string{"Content-Type: application/json", "Origin: http://localhost:9"}, 403, "web page at"},
		{"null origin", "POST", "", lease("i"), []string{"Content-Type: application/json", "Origin: null"}, 403, "web page at"},
		{"text/plain", "POST", "", lease("j"), []string{"Content-Type: text/plain"}, 415, "unknown format"},
		{"form", "POST", "", lease("k"), []string{"Content-Type: application/x-www-form-urlencoded"}, 415, "unknown format"},
		{"text/plain patch", "PATCH", "", `{}`, []string{"Content-Type: text/plain; charset=utf-8"}, 415, "Unsupported Media Type"},
		{"cross-site read", "GET", "", "", []string{"Sec-Fetch-Site: cross-site"}, 200, ""},
		{"health, any host", "GET", "attacker.example", "", nil, 200, ""},
	} {
		path := leases
		switch {
		case c.name == "health, any host":
			path = "/readyz"
		case c.method == "PATCH" || c.method == "DELETE":
			path = leases + "/a"
		}
		code, body := send(open, c.method, path, c.host, c.body, c.hdr...)
		if code != c.code || !strings.Contains(body, c.msg) || (code >= 400 && !strings.Contains(body, `"kind":"Status"`)) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, body, c.code, c.msg)
		}
	}
	// The UI's hand-over preview (it runs a strategy) is guarded as any
	// write; its own rule takes JSON only, from authenticated users too.
	preview := "/ui/api/v1/namespaces/default/leases/a/handover-preview"
	for _, c := range []struct {
		name string
		base string
		hdr  []string
		code int
		msg  string
	}{
		{"preview, cross-site", open, []string{"Content-Type: application/json", "Sec-Fetch-Site: cross-site"}, 403, "a cross-site request"},
		{"preview, foreign origin", open, []string{"Content-Type: application/json", "Origin: http://localhost:9"}, 403, "web page at"},
		{"preview, text/plain", open, []string{"Content-Type: text/plain"}, 415, "unknown format"},
		{"preview, same origin", open, []string{"Content-Type: application/json", "Origin: http://" + self, "Sec-Fetch-Site: same-origin"}, 501, "no election controller"},
		{"preview, authenticated text/plain", authed, []string{"Authorization: Bearer t", "Content-Type: text/plain"}, 415, "Content-Type: application/json"},
	} {
		code, body := send(c.base, "POST", preview, "", `{"candidate":"c"}`, c.hdr...)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, body, c.code, c.msg)
		}
	}
	// Authenticated: a device reached by any name, from anywhere.
	code, body := send(authed, "POST", leases, "pi.local:8080", lease("z"), "Authorization: Bearer t",
		"Content-Type: application/json", "Origin: http://pi.local:8080", "Sec-Fetch-Site: same-site")
	if code != 201 {
		t.Errorf("authenticated write as pi.local: %d %s", code, body)
	}
}
