package web_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/metrics"
	"github.com/leasehold/leasehold/web/ui"
)

// The users of the authorization matrix, in the order of each route's
// expected codes.
var matrixUsers = []string{"anonymous", "nobody", "edge", "reader", "admin"}

// matrixPolicies: "nobody" authenticates but matches no policy; "edge" may
// read and write leases in namespace edge and read every non-resource path;
// "reader" may
// read every resource everywhere and every non-resource path; "admin" may
// do everything.
var matrixPolicies = auth.Policies{
	{User: "edge", Namespace: "edge", Resource: "leases", APIGroup: "coordination.k8s.io"},
	// What an earlier README gave every authenticated user: it must not
	// open the admin endpoints, or another namespace's decisions.
	{User: "edge", Readonly: true, NonResourcePath: "*"},
	{User: "reader", Readonly: true, Namespace: "*", Resource: "*", APIGroup: "*"},
	{User: "reader", Readonly: true, NonResourcePath: "*"},
	{User: "admin", Namespace: "*", Resource: "*", APIGroup: "*", NonResourcePath: "*"},
}

// TestAuthorizationMatrix runs every kind of route the server serves
// against five users, checking the status code and that no answer to a
// user carries data from a namespace it may not read.
func TestAuthorizationMatrix(t *testing.T) {
	ctx := context.Background()
	reg := metrics.New() // per-lease series off, the default
	var tokens []auth.TokenEntry
	for _, u := range matrixUsers[1:] {
		tokens = append(tokens, auth.TokenEntry{Token: "token-" + u, User: auth.User{Name: u}})
	}
	base, hist := startAuthorizingServer(t, tokens, matrixPolicies, reg)

	// The secret namespace's data: a lease with a recognisable holder and
	// a decision that names it.
	admin := "Authorization: Bearer token-admin"
	const secret = "holder-from-secret-ns"
	for _, ns := range []string{"edge", "secret"} {
		holder := "holder-from-" + ns + "-ns"
		r := do(t, "POST", base+"/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases",
			`{"metadata":{"name":"l"},"spec":{"holderIdentity":"`+holder+`"}}`, admin)
		if r.code != 201 {
			t.Fatalf("seed %s: %d %s", ns, r.code, r.body)
		}
		if err := hist.RecordDecision(ctx, ns, "l", history.DecisionRecord{Time: time.Now(), Trigger: "no_holder", Chosen: holder}, 10); err != nil {
			t.Fatal(err)
		}
	}

	const (
		coll    = "/apis/coordination.k8s.io/v1/namespaces/%s/leases"
		cands   = "/apis/coordination.k8s.io/v1beta1/namespaces/%s/leasecandidates"
		renew   = `{"metadata":{"name":"m-{u}"},"spec":{"holderIdentity":"{u}"}}`
		patch   = `{"spec":{"holderIdentity":"patched"}}`
		mergeCT = "Content-Type: application/merge-patch+json"
	)
	routes := []struct {
		method, path, body string
		hdr                string
		codes              string // anonymous nobody edge reader admin
	}{
		// Public: no credentials needed, no data.
		{"GET", "/healthz", "", "", "200 200 200 200 200"},
		{"GET", "/readyz", "", "", "200 200 200 200 200"},
		{"GET", "/ui/", "", "", "200 200 200 200 200"},
		// Resources in the user's namespace and in another one.
		{"GET", fmt.Sprintf(coll, "edge"), "", "", "401 403 200 200 200"},
		{"GET", fmt.Sprintf(coll, "secret"), "", "", "401 403 403 200 200"},
		{"GET", fmt.Sprintf(coll, "edge") + "/l", "", "", "401 403 200 200 200"},
		{"GET", fmt.Sprintf(coll, "secret") + "/l", "", "", "401 403 403 200 200"},
		{"GET", fmt.Sprintf(coll, "edge") + "?watch=true&timeoutSeconds=1", "", "", "401 403 200 200 200"},
		{"GET", fmt.Sprintf(coll, "secret") + "?watch=true&timeoutSeconds=1", "", "", "401 403 403 200 200"},
		{"GET", "/apis/coordination.k8s.io/v1/watch/namespaces/secret/leases?timeoutSeconds=1", "", "", "401 403 403 200 200"},
		{"GET", "/apis/coordination.k8s.io/v1/leases", "", "", "401 403 403 200 200"},
		{"GET", fmt.Sprintf(cands, "edge"), "", "", "401 403 403 200 200"},
		{"POST", fmt.Sprintf(coll, "edge"), renew, "", "401 403 201 403 201"},
		{"POST", fmt.Sprintf(coll, "secret"), renew, "", "401 403 403 403 201"},
		{"PATCH", fmt.Sprintf(coll, "edge") + "/m-{u}", patch, mergeCT, "401 403 200 403 200"},
		{"DELETE", fmt.Sprintf(coll, "edge") + "/m-{u}", "", "", "401 403 200 403 200"},
		// Non-resource paths.
		{"GET", "/apis", "", "", "401 403 200 200 200"},
		{"GET", "/apis/coordination.k8s.io/v1", "", "", "401 403 200 200 200"},
		{"GET", "/version", "", "", "401 403 200 200 200"},
		{"GET", "/metrics", "", "", "401 403 200 200 200"},
		// The UI's JSON: the system view is a non-resource path, a
		// lease's decisions its namespace's subresource.
		{"GET", "/ui/api/v1/system", "", "", "401 403 200 200 200"},
		{"GET", "/ui/api/v1/namespaces/edge/leases/l/decisions", "", "", "401 403 200 200 200"},
		{"GET", "/ui/api/v1/namespaces/secret/leases/l/decisions", "", "", "401 403 403 200 200"},
		// Drains: the LeaseCandidates' subresource "drain", not an admin
		// endpoint.
		{"GET", "/leasehold/v1/namespaces/edge/drains", "", "", "401 403 403 200 200"},
		{"GET", "/leasehold/v1/drains", "", "", "401 403 403 200 200"},
		{"PUT", "/leasehold/v1/namespaces/edge/drains/d-{u}", "", "", "401 403 403 403 201"},
		{"DELETE", "/leasehold/v1/namespaces/edge/drains/d-{u}", "", "", "401 403 403 403 200"},
		// A hand-over preview is authorized as the hand-over (patch of
		// the lease); this server wires no election controller (501).
		{"POST", "/ui/api/v1/namespaces/edge/leases/l/handover-preview", `{"candidate":"c"}`, "Content-Type: application/json", "401 403 501 403 501"},
		{"POST", "/ui/api/v1/namespaces/secret/leases/l/handover-preview", `{"candidate":"c"}`, "Content-Type: application/json", "401 403 403 403 501"},
		// Admin: the whole database.
		{"GET", "/leasehold/v1/backup", "", "", "401 403 403 200 200"},
		// Last, as they change namespace secret's data the checks above
		// look for.
		{"PATCH", fmt.Sprintf(coll, "secret") + "/l", patch, mergeCT, "401 403 403 403 200"},
		{"DELETE", fmt.Sprintf(coll, "secret"), "", "", "401 403 403 403 200"},
	}
	for _, rt := range routes {
		codes := strings.Fields(rt.codes)
		for i, u := range matrixUsers {
			var hdr []string
			if u != "anonymous" {
				hdr = append(hdr, "Authorization: Bearer token-"+u)
			}
			if rt.hdr != "" {
				hdr = append(hdr, rt.hdr)
			}
			path := strings.ReplaceAll(rt.path, "{u}", u)
			r := do(t, rt.method, base+path, strings.ReplaceAll(rt.body, "{u}", u), hdr...)
			if fmt.Sprint(r.code) != codes[i] {
				t.Errorf("%s %s as %s: %d, want %s: %.200s", rt.method, path, u, r.code, codes[i], r.body)
			}
			if (u != "reader" && u != "admin") && strings.Contains(r.body, secret) {
				t.Errorf("%s %s as %s: the answer carries namespace secret's data: %.300s", rt.method, path, u, r.body)
			}
		}
	}
}

// startAuthorizingServer serves, on a real engine and bbolt store, with
// token authentication, the policies, the online backup and the UI's
// decision history: every route an authorization test needs. It returns
// the base URL and the engine.
func startAuthorizingServer(t *testing.T, tokens []auth.TokenEntry, policies auth.Policies, reg *metrics.Registry) (string, *history.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "db"), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	hist := history.New(st, nil)
	srv, err := web.NewServer(web.Options{
		Engine: eng, Version: testVersion, Metrics: reg, Policies: policies, Backup: st.Backup,
		Auth: &auth.Authenticator{Tokens: auth.NewTokens(tokens)},
		UI:   ui.Sources{Decisions: hist, Timelines: hist}, Drains: hist,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String(), hist
}

// TestBackupMetric: a backup served in full sets
// leasehold_backup_last_success_timestamp_seconds (the backup-age alert's
// series); before any, the series is absent rather than 0.
func TestBackupMetric(t *testing.T) {
	reg := metrics.New()
	tokens := []auth.TokenEntry{{Token: "token-admin", User: auth.User{Name: "admin"}}}
	base, _ := startAuthorizingServer(t, tokens, matrixPolicies, reg)
	admin := "Authorization: Bearer token-admin"
	const name = "leasehold_backup_last_success_timestamp_seconds"
	if r := do(t, "GET", base+"/metrics", "", admin); r.code != 200 || strings.Contains(r.body, name) {
		t.Fatalf("before any backup: /metrics %d, carries %s: %t", r.code, name, strings.Contains(r.body, name))
	}
	before := time.Now().Unix()
	if r := do(t, "GET", base+"/leasehold/v1/backup", "", admin); r.code != 200 || len(r.body) == 0 {
		t.Fatalf("backup: %d, %d bytes", r.code, len(r.body))
	}
	r := do(t, "GET", base+"/metrics", "", admin)
	var at int64
	for line := range strings.SplitSeq(r.body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			fmt.Sscan(v, &at)
		}
	}
	if at < before || at > time.Now().Unix() {
		t.Errorf("after a backup: %s = %d, want the time of the backup (between %d and now)", name, at, before)
	}
}
