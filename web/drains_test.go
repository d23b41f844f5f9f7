package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1beta1"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/web/auth"
)

// drainTestServer is an authorizing server with drains, its history, and
// tokens for admin and for edge (who may update leasecandidates in edge).
func drainTestServer(t *testing.T) (string, *history.Store) {
	t.Helper()
	tokens := []auth.TokenEntry{
		{Token: "token-admin", User: auth.User{Name: "admin"}},
		{Token: "token-edge", User: auth.User{Name: "edge"}},
	}
	policies := auth.Policies{
		{User: "admin", Namespace: "*", Resource: "*", APIGroup: "*", NonResourcePath: "*"},
		{User: "edge", Namespace: "edge", Resource: "*", APIGroup: "coordination.k8s.io"},
	}
	return startAuthorizingServer(t, tokens, policies, nil)
}

func seedCandidate(t *testing.T, base, ns, name, lease, token string) {
	t.Helper()
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	r := do(t, "POST", base+"/apis/coordination.k8s.io/v1beta1/namespaces/"+ns+"/leasecandidates",
		`{"metadata":{"name":"`+name+`"},"spec":{"leaseName":"`+lease+`","binaryVersion":"1.37.0","emulationVersion":"1.37.0","strategy":"OldestEmulationVersion","renewTime":"`+now+`"}}`,
		"Authorization: Bearer "+token)
	if r.code != 201 {
		t.Fatalf("create candidate %s: %d %s", name, r.code, r.body)
	}
}

// TestDrainEndpoints: draining records the authenticated user; draining
// again keeps the first record; the only live candidate of a lease is
// refused with a 409 Status naming the lease unless forced; undrain
// removes it (404 after); the leases' decision histories say who did
// what; reading and changing drains is authorized as the LeaseCandidate's
// subresource "drain".
func TestDrainEndpoints(t *testing.T) {
	base, hist := drainTestServer(t)
	admin, edge := "Authorization: Bearer token-admin", "Authorization: Bearer token-edge"
	seedCandidate(t, base, "edge", "c1", "l", "token-admin")
	seedCandidate(t, base, "edge", "c2", "l", "token-admin")
	drains := base + "/leasehold/v1/namespaces/edge/drains/"

	r := do(t, "PUT", drains+"c1?fieldManager=leasehold-drain", "", edge)
	var rec history.DrainRecord
	if r.code != 201 || json.Unmarshal([]byte(r.body), &rec) != nil || rec.By != "edge" || rec.Identity != "c1" || rec.Via != "leasehold drain" {
		t.Fatalf("drain c1 as edge: %d %s; want 201 with edge's record", r.code, r.body)
	}
	if r := do(t, "PUT", drains+"c1", "", admin); r.code != 200 || !strings.Contains(r.body, `"by":"edge"`) {
		t.Errorf("drain c1 again as admin: %d %s; want 200 and edge's first record", r.code, r.body)
	}
	if r := do(t, "GET", drains+"c1", "", edge); r.code != 200 || !strings.Contains(r.body, `"kind":"Drain"`) {
		t.Errorf("get the drain of c1: %d %s", r.code, r.body)
	}
	r = do(t, "PUT", drains+"c2", "", edge)
	if r.code != 409 || !strings.Contains(r.body, `"reason":"Conflict"`) || !strings.Contains(r.body, "c2 is the only live candidate of lease l") {
		t.Errorf("drain the last live candidate c2: %d %s; want a 409 Status naming lease l", r.code, r.body)
	}
	if r := do(t, "PUT", drains+"c2?force=true", "", edge); r.code != 201 || !strings.Contains(r.body, `"forced":true`) {
		t.Errorf("forced drain of c2: %d %s", r.code, r.body)
	}
	if r := do(t, "GET", base+"/leasehold/v1/namespaces/edge/drains", "", edge); r.code != 200 || strings.Count(r.body, `"kind":"Drain"`) != 2 {
		t.Errorf("list edge's drains: %d %s; want c1 and c2", r.code, r.body)
	}
	// A plain holder, no candidate: nothing to refuse.
	if r := do(t, "PUT", drains+"host%2F7_x", "", edge); r.code != 201 || !strings.Contains(r.body, `"identity":"host/7_x"`) {
		t.Errorf("drain an identity with a slash: %d %s", r.code, r.body)
	}
	if r := do(t, "DELETE", drains+"c2", "", edge); r.code != 200 || !strings.Contains(r.body, `"forced":true`) {
		t.Errorf("undrain c2: %d %s; want the removed record", r.code, r.body)
	}
	if r := do(t, "DELETE", drains+"c2", "", edge); r.code != 404 || !strings.Contains(r.body, `drains.leasehold.dev \"c2\" not found`) {
		t.Errorf("undrain c2 again: %d %s; want 404", r.code, r.body)
	}
	// Authorization: another namespace is edge's to neither read nor change.
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		if r := do(t, m, base+"/leasehold/v1/namespaces/other/drains/x", "", edge); r.code != 403 {
			t.Errorf("%s another namespace's drain as edge: %d %s; want 403", m, r.code, r.body)
		}
	}
	if r := do(t, "GET", base+"/leasehold/v1/drains", "", edge); r.code != 403 {
		t.Errorf("list every namespace's drains as edge: %d; want 403", r.code)
	}
	if r := do(t, "PUT", drains+"x", ""); r.code != 401 {
		t.Errorf("drain without credentials: %d; want 401", r.code)
	}
	recs, err := hist.Decisions(context.Background(), "edge", "l")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range recs {
		got = append(got, d.Action+" "+d.Chosen+" by "+d.Module.Name)
	}
	if want := "drain c1 by operator edge,drain c2 by operator edge,undrain c2 by operator edge"; strings.Join(got, ",") != want {
		t.Errorf("lease l's decision history: %q, want %q", strings.Join(got, ","), want)
	}
}

// warnings collects the Warning headers client-go receives.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

// TestDrainAnnotation: client-go setting leasehold.dev/drain on a
// LeaseCandidate drains its identity for the user it authenticated as,
// a refused drain comes back as a Warning, "false" undrains, and a
// re-created candidate without the annotation stays drained.
func TestDrainAnnotation(t *testing.T) {
	base, hist := drainTestServer(t)
	ctx := context.Background()
	w := &warnings{}
	c, err := coordinationclient.NewForConfig(&rest.Config{Host: base, BearerToken: "token-edge", WarningHandler: w})
	if err != nil {
		t.Fatal(err)
	}
	lcs := c.LeaseCandidates("edge")
	now := metav1.NewMicroTime(time.Now())
	for _, name := range []string{"a", "b"} {
		if _, err := lcs.Create(ctx, &coordinationv1beta1.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: "l", BinaryVersion: "1.37.0", EmulationVersion: "1.37.0", Strategy: "OldestEmulationVersion", RenewTime: &now}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate := func(name, value string) {
		t.Helper()
		patch := `{"metadata":{"annotations":{"leasehold.dev/drain":` + value + `}}}`
		if _, err := lcs.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("annotate %s %s: %v", name, value, err)
		}
	}
	drained := func(name string) (history.DrainRecord, bool) {
		t.Helper()
		rec, found, err := hist.DrainOf(ctx, "edge", name)
		if err != nil {
			t.Fatal(err)
		}
		return rec, found
	}
	annotate("a", `"true"`)
	if rec, ok := drained("a"); !ok || rec.By != "edge" || rec.Via != "annotation on LeaseCandidate a" {
		t.Fatalf("after annotating a: %+v drained=%v; want drained by edge through the annotation", rec, ok)
	}
	annotate("b", `"true"`)
	if _, ok := drained("b"); ok {
		t.Error("b, the last live candidate, was drained by the annotation")
	}
	w.mu.Lock()
	got := strings.Join(w.got, "\n")
	w.mu.Unlock()
	if !strings.Contains(got, "not drained") || !strings.Contains(got, "only live candidate of lease l") {
		t.Errorf("client-go's warnings %q; want the refusal", got)
	}
	annotate("b", `"force"`)
	if rec, ok := drained("b"); !ok || !rec.Forced {
		t.Errorf("after annotating b force: %+v drained=%v; want a forced drain", rec, ok)
	}
	annotate("b", `"false"`)
	if _, ok := drained("b"); ok {
		t.Error("b still drained after annotating it false")
	}
	// Re-created without the annotation, a is still drained: the drain
	// is the identity's.
	if err := lcs.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := lcs.Create(ctx, &coordinationv1beta1.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: "l", BinaryVersion: "1.37.0", EmulationVersion: "1.37.0", Strategy: "OldestEmulationVersion", RenewTime: &now}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := drained("a"); !ok {
		t.Error("a undrained by its re-creation")
	}
	// Removing the annotation it was drained with undrains it.
	annotate("a", `"true"`)
	annotate("a", `null`)
	if _, ok := drained("a"); ok {
		t.Error("a still drained after its annotation was removed")
	}
}
