package ui_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
)

// TestCrossSitePageCannotWrite: a page on another origin, in headless
// Chromium, tries what the hostile review did against a server without
// authentication: a no-cors fetch POSTing a Lease as a Blob (no
// Content-Type, no preflight), a text/plain form to the action endpoint,
// and a fetch through a name that is not the server's (DNS rebinding
// is simulated by the Host the attacker's name carries). Nothing is
// created, and the server's own page keeps working.
func TestCrossSitePageCannotWrite(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	target := e.base + "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
	leaseJSON := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"squatted-by-webpage"},"spec":{"holderIdentity":"web","leaseDurationSeconds":2000000000}}`
	page := `<!doctype html><title>attacker</title><form id=f method=POST enctype="text/plain" target=sink action="` + e.base + `/ui/api/v1/namespaces/kube-system/leases/squatted/actions/delete"><input name='{"uid":"x","a":"' value='"}'></form><iframe name=sink></iframe>
<script>
(async () => {
  try {
    await fetch(` + "`" + target + "`" + `, {method: 'POST', mode: 'no-cors', body: new Blob([` + "`" + leaseJSON + "`" + `])});
    await fetch(` + "`" + target + "`" + `, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: ` + "`" + leaseJSON + "`" + `});
  } catch (e) {}
  document.getElementById('f').submit();
  setTimeout(() => { document.title = 'sent'; }, 500);
})();
</script>`
	// The attacker's origin: another port, reached by a name other than
	// the server's (localhost vs 127.0.0.1: cross-site for the browser).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	ctx := newTab(t, 800, 600)
	navigate(t, ctx, "http://localhost:"+port+"/")
	waitFor(t, ctx, 10*time.Second, `document.title === 'sent'`, `document.title`)

	res, _ := e.eng.ResourceFor(engine.GroupName, "v1", "leases")
	if _, err := e.eng.Get(context.Background(), engine.Scope{Resource: res, Version: "v1", Namespace: "kube-system"}, "squatted-by-webpage", &metav1.GetOptions{}); err == nil {
		t.Fatal("a cross-site page created kube-system/squatted-by-webpage")
	}

	// DNS rebinding: the same request with the Host an attacker's name
	// would carry is refused before it is read; the server's own name,
	// IP addresses and localhost are served.
	for host, want := range map[string]int{"attacker.example": http.StatusForbidden, "localhost": http.StatusOK} {
		req, _ := http.NewRequest("GET", e.base+"/apis/coordination.k8s.io/v1/leases", nil)
		req.Host = host + ":" + strings.Split(e.base, ":")[2]
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	// Tools without a browser's headers keep working.
	e.createLease(t, lease{ns: "default", name: "tool", holder: "cli", duration: 10})
}
