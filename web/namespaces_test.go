package web_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
)

// TestNamespaceLifecycleWire compares the NamespaceLifecycle admission's
// answers with kube-apiserver's bodies: 404 into a missing namespace
// (strict), 403 into a terminating one, and the namespace's own delete.
func TestNamespaceLifecycleWire(t *testing.T) {
	st, err := boltdb.Open(context.Background(), filepath.Join(t.TempDir(), "db"), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st, NamespaceLifecycle: engine.NamespacesStrict})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, func(o *web.Options) { o.Engine = eng })
	leases := func(ns string) string { return base + "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases" }
	lease := func(name, extra string) string {
		return `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + name + `"` + extra + `},"spec":{"holderIdentity":"a"}}`
	}
	ct := "Content-Type: application/json"

	do(t, "POST", leases("nowhere"), lease("l", ""), ct).expect(t, 404, wireSample(t, "status-404-namespace-notfound.json")+"\n")

	r := do(t, "POST", base+"/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`, ct)
	if r.code != 201 || !strings.Contains(r.body, `"labels":{"kubernetes.io/metadata.name":"team-a"}`) ||
		!strings.HasSuffix(r.body, `"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}`+"\n") {
		t.Fatalf("create namespace: %d %s", r.code, r.body)
	}
	if r := do(t, "POST", leases("team-a"), lease("held", `,"finalizers":["example.com/hold"]`), ct); r.code != 201 {
		t.Fatalf("create lease: %d %s", r.code, r.body)
	}
	// The first delete answers 200 with the namespace, Terminating.
	r = do(t, "DELETE", base+"/api/v1/namespaces/team-a", "")
	if r.code != 200 || !strings.Contains(r.body, `"deletionTimestamp":"`) || !strings.HasSuffix(r.body, `"status":{"phase":"Terminating"}}`+"\n") {
		t.Fatalf("delete namespace: %d %s", r.code, r.body)
	}
	do(t, "POST", leases("team-a"), lease("late", ""), ct).expect(t, 403, wireSample(t, "status-403-namespace-terminating.json")+"\n")
	do(t, "DELETE", base+"/api/v1/namespaces/default", "").expect(t, 403,
		`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"namespaces \"default\" is forbidden: this namespace may not be deleted","reason":"Forbidden","details":{"name":"default","kind":"namespaces"},"code":403}`+"\n")

	// Once the lease's own finalizer is gone, so is the namespace.
	if r := do(t, "PATCH", leases("team-a")+"/held", `{"metadata":{"finalizers":null}}`, "Content-Type: application/merge-patch+json"); r.code != 200 {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := do(t, "GET", base+"/api/v1/namespaces/team-a", "")
		if r.code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace still there: %d %s", r.code, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The Table kubectl get ns asks for.
	r = do(t, "GET", base+"/api/v1/namespaces/default", "", "Accept: application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 200 || !strings.Contains(r.body, `"columnDefinitions":[{"name":"Name","type":"string","format":"name",`) ||
		!strings.Contains(r.body, `{"name":"Status","type":"string","format":"","description":"The status of the namespace","priority":0}`) ||
		!strings.Contains(r.body, `"rows":[{"cells":["default","Active",`) {
		t.Errorf("table: %d %s", r.code, r.body)
	}
}
