package lease

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeconfigTLSAndToken reads a kubeconfig with a CA (inline data), a
// token file and a namespace, and checks that requests verify the server's
// certificate and carry the token, and that error Statuses classify.
func TestKubeconfigTLSAndToken(t *testing.T) {
	var gotAuth, gotAccept string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotAccept = r.Header.Get("Authorization"), r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/edge/leases/a":
			holder := "dev-1"
			_ = json.NewEncoder(w).Encode(coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "edge", ResourceVersion: "7"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
			})
		case r.Method == http.MethodPut:
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"leases.coordination.k8s.io \"b\" not found","reason":"NotFound","code":404}`)
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: edge
clusters:
- name: other
  cluster: {server: "https://wrong.invalid"}
- name: c
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: edge
  context: {cluster: c, user: u, namespace: edge}
users:
- name: u
  user: {tokenFile: token}
`, srv.URL, base64.StdEncoding.EncodeToString(ca))
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadKubeconfig(path, "")
	if err != nil {
		t.Fatalf("LoadKubeconfig: %v", err)
	}
	if cfg.Server != srv.URL || cfg.Namespace != "edge" || cfg.BearerToken != "s3cret" {
		t.Fatalf("config = server %q namespace %q token %q", cfg.Server, cfg.Namespace, cfg.BearerToken)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := c.GetLease(ctx, "edge", "a")
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "dev-1" || l.ResourceVersion != "7" {
		t.Fatalf("GetLease = %+v, %v", l, err)
	}
	if gotAuth != "Bearer s3cret" || gotAccept != "application/json" {
		t.Errorf("request headers: Authorization %q, Accept %q", gotAuth, gotAccept)
	}
	if _, err := c.UpdateLease(ctx, l); !IsConflict(err) || IsAlreadyExists(err) || err.Error() != "the object has been modified" {
		t.Errorf("UpdateLease error = %v; want a Conflict", err)
	}
	if _, err := c.GetLease(ctx, "edge", "b"); !IsNotFound(err) {
		t.Errorf("GetLease(b) error = %v; want NotFound", err)
	}

	// Without the CA the same server must be refused.
	cfg.CAData = nil
	c, _ = New(cfg)
	if _, err := c.GetLease(ctx, "edge", "a"); err == nil {
		t.Error("GetLease without the CA succeeded; want a certificate error")
	}
	if _, err := LoadKubeconfig(path, "missing"); err == nil {
		t.Error("LoadKubeconfig with an unknown context succeeded")
	}
}
