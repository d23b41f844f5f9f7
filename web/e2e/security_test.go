package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/internal/testneeds"
)

// secureServer is a loopback server with TLS (--tls-auto), tokens, client
// certificates and an ABAC policy: admin may do everything, the readers
// group may only read.
type secureServer struct {
	*testServer
	base   string // https://127.0.0.1:port
	caPEM  []byte
	client *x509.CertPool
	cert   tls.Certificate // CN=devices-ro, O=readers, from the client CA
}

const (
	adminToken  = "admin-7c1f9e"
	readerToken = "reader-0b9d42"
	abacPolicy  = `# admin: everything; readers: read-only, discovery and /metrics included
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"admin","namespace":"*","resource":"*","apiGroup":"*","nonResourcePath":"*"}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"group":"readers","readonly":true,"namespace":"*","resource":"*","apiGroup":"*","nonResourcePath":"*"}}
`
)

func startSecureServer(t *testing.T, extraArgs ...string) *secureServer {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	policy := filepath.Join(dir, "policy.jsonl")
	clientCA := filepath.Join(dir, "client-ca.crt")
	ca, err := pki.NewAuthority("test-client-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClient("devices-ro", []string{"readers"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		tokens:   adminToken + ",admin,uid-1,\"system:masters,admins\"\n" + readerToken + ",reader,uid-2,readers\n",
		policy:   abacPolicy,
		clientCA: string(ca.CertPEM),
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"--tls-auto", "--token-auth-file", tokens, "--authorization-policy-file", policy,
		"--client-ca-file", clientCA}, extraArgs...)
	ts := startServerIn(t, filepath.Join(dir, "data"), args...)
	s := &secureServer{testServer: ts, base: strings.Replace(ts.URL, "http://", "https://", 1), cert: cert}
	if s.caPEM, err = os.ReadFile(filepath.Join(ts.DataDir, "pki", "ca.crt")); err != nil {
		t.Fatal(err)
	}
	s.client = x509.NewCertPool()
	s.client.AppendCertsFromPEM(s.caPEM)
	return s
}

// do sends one request as token (empty: anonymous) or, with useCert,
// with the client certificate.
func (s *secureServer) do(t *testing.T, method, path, token string, useCert bool, body string) (int, string) {
	t.Helper()
	tc := &tls.Config{RootCAs: s.client}
	if useCert {
		tc.Certificates = []tls.Certificate{s.cert}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const leasesPath = "/apis/coordination.k8s.io/v1/namespaces/default/leases"

// TestE2ESecurityAuthMatrix checks who may do what: anonymous and bad
// tokens get kube-apiserver's 401 Status, a read-only user (by token or
// client certificate) reads but gets the ABAC 403 on writes, the admin
// writes, and health checks and the UI page stay public.
func TestE2ESecurityAuthMatrix(t *testing.T) {
	t.Parallel()
	s := startSecureServer(t)
	const unauthorized = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`
	lease := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"uplink"},"spec":{"holderIdentity":"device-1","leaseDurationSeconds":15}}`
	forbiddenCreate := func(user string) string {
		return `leases.coordination.k8s.io is forbidden: User "` + user + `" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "default": No policy matched.`
	}
	for _, c := range []struct {
		name, method, path, token string
		cert                      bool
		body                      string
		code                      int
		want                      string // exact body (401) or message (403)
	}{
		{"anonymous list", "GET", leasesPath, "", false, "", 401, unauthorized},
		{"anonymous discovery", "GET", "/apis", "", false, "", 401, unauthorized},
		{"anonymous metrics", "GET", "/metrics", "", false, "", 401, unauthorized},
		{"anonymous UI data", "GET", "/ui/api/v1/system", "", false, "", 401, unauthorized},
		{"bad token", "GET", leasesPath, "not-a-token", false, "", 401, unauthorized},
		{"anonymous readyz", "GET", "/readyz", "", false, "", 200, "ok"},
		{"anonymous livez check", "GET", "/livez/ping", "", false, "", 200, "ok"},
		{"reader create", "POST", leasesPath, readerToken, false, lease, 403, forbiddenCreate("reader")},
		{"admin create", "POST", leasesPath, adminToken, false, lease, 201, ""},
		{"reader get", "GET", leasesPath + "/uplink", readerToken, false, "", 200, ""},
		{"reader delete", "DELETE", leasesPath + "/uplink", readerToken, false, "", 403,
			`leases.coordination.k8s.io "uplink" is forbidden: User "reader" cannot delete resource "leases" in API group "coordination.k8s.io" in the namespace "default": No policy matched.`},
		{"reader non-resource write", "POST", "/metrics", readerToken, false, "", 403,
			`forbidden: User "reader" cannot post path "/metrics": No policy matched.`},
		{"cert list", "GET", leasesPath, "", true, "", 200, ""},
		{"cert create", "POST", leasesPath, "", true, lease, 403, forbiddenCreate("devices-ro")},
		{"cert wins over bad token", "GET", leasesPath, "not-a-token", true, "", 200, ""},
		{"admin UI data", "GET", "/ui/api/v1/system", adminToken, false, "", 200, ""},
	} {
		code, body := s.do(t, c.method, c.path, c.token, c.cert, c.body)
		if code != c.code {
			t.Errorf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, code, body, c.code)
			continue
		}
		switch c.code {
		case 401:
			if compact(t, body) != c.want {
				t.Errorf("%s: body %s, want %s", c.name, body, c.want)
			}
		case 403:
			var st struct{ Message, Reason string }
			if err := json.Unmarshal([]byte(body), &st); err != nil || st.Message != c.want || st.Reason != "Forbidden" {
				t.Errorf("%s: 403 %s, want message %q", c.name, body, c.want)
			}
		default:
			if c.want != "" && body != c.want {
				t.Errorf("%s: body %q, want %q", c.name, body, c.want)
			}
		}
	}
	// The page itself loads without a token; it then asks for one.
	if code, _ := s.do(t, "GET", "/ui/", "", false, ""); code != 200 {
		t.Errorf("GET /ui/ anonymously = %d, want 200", code)
	}
	// Tokens never reach the log.
	if log := s.Log(); strings.Contains(log, adminToken) || strings.Contains(log, readerToken) || strings.Contains(log, "not-a-token") {
		t.Errorf("a token appears in the server log:\n%s", log)
	}
}

func compact(t *testing.T, body string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(body)); err != nil {
		return body
	}
	return b.String()
}

// TestE2ESecurityRefusesInsecureNetwork checks the start-up rules off
// loopback: no authenticator or plain HTTP is refused with a message naming
// the fix and the override.
func TestE2ESecurityRefusesInsecureNetwork(t *testing.T) {
	testneeds.Slow(t, "starts a server per refused configuration")
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("t,u,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, []string{"without authentication", "--token-auth-file", "--insecure-allow-unauthenticated-network"}},
		{[]string{"--listen", ":0", "--token-auth-file", tokens, "--tls-auto=false"}, []string{"plain HTTP", "--tls-cert-file", "--insecure-allow-http-network"}},
		{[]string{"--listen", "0.0.0.0:0", "--insecure-allow-unauthenticated-network", "--tls-auto=false"}, []string{"plain HTTP"}},
	} {
		code, _, stderr := runCLI(t, append([]string{"serve", "--data-dir", filepath.Join(dir, "data")}, c.args...)...)
		if code != 2 {
			t.Errorf("serve %q exited %d, want 2 (refused); stderr: %s", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("serve %q: message %q does not mention %q", c.args, stderr, w)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("a refused start created the data directory")
	}
	// The overrides and the secure configuration pass validation: the
	// server starts (on a random port), speaking TLS or not as expected.
	for _, c := range []struct {
		args    []string
		wantTLS bool
	}{
		{[]string{"--listen", "0.0.0.0:0", "--token-auth-file", tokens}, true},
		{[]string{"--listen", "0.0.0.0:0", "--insecure-allow-unauthenticated-network"}, true},
		{[]string{"--listen", "0.0.0.0:0", "--insecure-allow-unauthenticated-network", "--tls-auto=false", "--insecure-allow-http-network"}, false},
		{[]string{"--listen", "127.0.0.1:0"}, false},
	} {
		p, ready := spawnServer(t, append([]string{"--data-dir", t.TempDir(), "--log-level", "warn"}, c.args...), nil)
		if !ready {
			t.Errorf("serve %q refused: exit %d: %s", c.args, p.code, p.log.String())
			continue
		}
		if tlsOn := strings.HasPrefix(p.url, "https://"); tlsOn != c.wantTLS {
			t.Errorf("serve %q: TLS on = %v, want %v", c.args, tlsOn, c.wantTLS)
		}
		if code, ok := p.stop(15 * time.Second); !ok || code != 0 {
			t.Errorf("serve %q: exit %d (stopped: %v); log:\n%s", c.args, code, ok, p.log.String())
		}
	}
}

// TestE2ESecurityKubectlTLS runs kubectl over HTTPS with the kubeconfig the
// server wrote (generated CA, admin's token), and with one printed by
// "leasehold kubeconfig" for the read-only user.
func TestE2ESecurityKubectlTLS(t *testing.T) {
	t.Parallel()
	s := startSecureServer(t, "--write-kubeconfig-user", "admin")
	wantKubeconfig(t, s.Kubeconfig, s.base)
	k := newKubectl(t, s.testServer)
	if code, _, errOut := runCLI(t, "healthcheck", "--listen", strings.TrimPrefix(s.base, "https://"), "--data-dir", s.DataDir); code != 0 {
		t.Errorf("healthcheck over TLS = %d %s", code, errOut)
	}
	manifest := filepath.Join(t.TempDir(), "lease.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: tls-lease\nspec:\n  holderIdentity: device-9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := k.run("apply", "-f", manifest); code != 0 {
		t.Fatalf("kubectl apply over TLS: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := k.run("get", "lease", "tls-lease", "-o", "jsonpath={.spec.holderIdentity}"); code != 0 || out != "device-9" {
		t.Fatalf("kubectl get over TLS = %d %q %s", code, out, errOut)
	}

	// A kubeconfig for another machine, printed as JSON.
	tokenFile := filepath.Join(t.TempDir(), "token")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	_ = os.WriteFile(tokenFile, []byte(readerToken+"\n"), 0o600)
	_ = os.WriteFile(caFile, s.caPEM, 0o600)
	code, out, errOut := runCLI(t, "kubeconfig", "--server", s.base, "--token-file", tokenFile, "--certificate-authority", caFile, "-o", "json")
	if code != 0 {
		t.Fatalf("leasehold kubeconfig: %d %s", code, errOut)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				CAData string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(out), &kc); err != nil || len(kc.Clusters) != 1 {
		t.Fatalf("kubeconfig -o json is not JSON: %v\n%s", err, out)
	}
	if ca, _ := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CAData); !bytes.Equal(ca, s.caPEM) {
		t.Error("printed kubeconfig does not embed the CA")
	}
	readerKC := filepath.Join(t.TempDir(), "reader.kubeconfig")
	_ = os.WriteFile(readerKC, []byte(out), 0o600)
	k.kubeconfig = readerKC
	if code, out, errOut := k.run("get", "lease", "tls-lease", "-o", "name"); code != 0 || strings.TrimSpace(out) != "lease.coordination.k8s.io/tls-lease" {
		t.Errorf("reader kubectl get = %d %q %s", code, out, errOut)
	}
	if code, _, errOut := k.run("delete", "lease", "tls-lease"); code == 0 || !strings.Contains(errOut, `User "reader" cannot delete resource "leases"`) {
		t.Errorf("reader kubectl delete = %d %s, want Forbidden", code, errOut)
	}
	// YAML is the default and reads back the same.
	_, yout, _ := runCLI(t, "kubeconfig", "--server", s.base, "--token-file", tokenFile)
	var fromYAML map[string]any
	if err := yaml.Unmarshal([]byte(yout), &fromYAML); err != nil || fromYAML["current-context"] != "leasehold" {
		t.Errorf("kubeconfig YAML: %v\n%s", err, yout)
	}
}
