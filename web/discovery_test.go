package web_test

import (
	"errors"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"

	"github.com/leasehold/leasehold/web"
)

func TestLegacyDiscovery(t *testing.T) {
	base := startServer(t, nil)
	for path, sample := range map[string]string{
		"/apis/coordination.k8s.io":         "discovery-group.json",
		"/apis/coordination.k8s.io/v1":      "discovery-v1.json",
		"/apis/coordination.k8s.io/v1beta1": "discovery-v1beta1.json",
		"/api/v1":                           "discovery-core-v1.json",
		"/apis/events.k8s.io/v1":            "discovery-events-v1.json",
	} {
		do(t, "GET", base+path, "").expect(t, 200, wireSample(t, sample)+"\n")
	}
	group := wireSample(t, "discovery-group.json")
	reviewGroups := `{"name":"authentication.k8s.io","versions":[{"groupVersion":"authentication.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"authentication.k8s.io/v1","version":"v1"}},` +
		`{"name":"authorization.k8s.io","versions":[{"groupVersion":"authorization.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"authorization.k8s.io/v1","version":"v1"}},`
	eventsGroup := `{"name":"events.k8s.io","versions":[{"groupVersion":"events.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"events.k8s.io/v1","version":"v1"}}`
	// In kube-apiserver's group priority order: events.k8s.io, the
	// reviews, coordination.k8s.io.
	list := `{"kind":"APIGroupList","apiVersion":"v1","groups":[` + eventsGroup + `,` + reviewGroups + `{` + strings.TrimPrefix(group, `{"kind":"APIGroup","apiVersion":"v1",`) + `]}` + "\n"
	do(t, "GET", base+"/apis", "").expect(t, 200, list)
	do(t, "GET", base+"/apis/authorization.k8s.io/v1", "").expect(t, 200, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"authorization.k8s.io/v1","resources":[`+
		`{"name":"selfsubjectaccessreviews","singularName":"selfsubjectaccessreview","namespaced":false,"kind":"SelfSubjectAccessReview","verbs":["create"]},`+
		`{"name":"selfsubjectrulesreviews","singularName":"selfsubjectrulesreview","namespaced":false,"kind":"SelfSubjectRulesReview","verbs":["create"]}]}`+"\n")
	do(t, "GET", base+"/apis/authentication.k8s.io/v1", "").expect(t, 200, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"authentication.k8s.io/v1","resources":[`+
		`{"name":"selfsubjectreviews","singularName":"selfsubjectreview","namespaced":false,"kind":"SelfSubjectReview","verbs":["create"]}]}`+"\n")
	// The core group lists v1 (namespaces and events).
	r := do(t, "GET", base+"/api", "")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1:`) {
		t.Errorf("/api: %d %s", r.code, r.body)
	}
	do(t, "POST", base+"/apis/coordination.k8s.io/v1", "").expect(t, 405, status405)
}

// eventsResource is the events entry of aggregated discovery, the same in
// the core group and in events.k8s.io.
const eventsResource = `{"resource":"events","responseKind":{"group":"","version":"","kind":"Event"},"scope":"Namespaced","singularResource":"event","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["ev"]}`

func TestAggregatedDiscovery(t *testing.T) {
	base := startServer(t, nil)
	accept := "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
	r := do(t, "GET", base+"/apis", "", accept)
	reviewItems := `{"metadata":{"name":"authentication.k8s.io"},"versions":[{"version":"v1","resources":[` +
		`{"resource":"selfsubjectreviews","responseKind":{"group":"","version":"","kind":"SelfSubjectReview"},"scope":"Cluster","singularResource":"selfsubjectreview","verbs":["create"]}],"freshness":"Current"}]},` +
		`{"metadata":{"name":"authorization.k8s.io"},"versions":[{"version":"v1","resources":[` +
		`{"resource":"selfsubjectaccessreviews","responseKind":{"group":"","version":"","kind":"SelfSubjectAccessReview"},"scope":"Cluster","singularResource":"selfsubjectaccessreview","verbs":["create"]},` +
		`{"resource":"selfsubjectrulesreviews","responseKind":{"group":"","version":"","kind":"SelfSubjectRulesReview"},"scope":"Cluster","singularResource":"selfsubjectrulesreview","verbs":["create"]}],"freshness":"Current"}]},`
	eventsItem := `{"metadata":{"name":"events.k8s.io"},"versions":[{"version":"v1","resources":[` + eventsResource + `],"freshness":"Current"}]},`
	want := strings.Replace(wireSample(t, "discovery-aggregated.json"), `"items":[`, `"items":[`+eventsItem+reviewItems, 1) + "\n"
	if r.code != 200 || r.body != want {
		t.Errorf("got %d %s\nwant %s", r.code, r.body, want)
	}
	etag := r.header.Get("Etag")
	if ct := r.header.Get("Content-Type"); ct != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" ||
		len(etag) != 130 || r.header.Get("Vary") != "Accept" || r.header.Get("Cache-Control") != "public" {
		t.Errorf("headers: %v", r.header)
	}
	r = do(t, "GET", base+"/apis", "", accept, "If-None-Match: "+etag)
	if r.code != 304 || r.body != "" {
		t.Errorf("304: %d %q", r.code, r.body)
	}
	r = do(t, "GET", base+"/apis", "", "Accept: application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2beta1","metadata":{},"items":[{"metadata":{"name":"events.k8s.io"}`) {
		t.Errorf("v2beta1: %d %s", r.code, r.body)
	}
	r = do(t, "GET", base+"/api", "", accept)
	if r.code != 200 || r.body != `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{},"versions":[{"version":"v1","resources":[`+
		eventsResource+`,`+
		`{"resource":"namespaces","responseKind":{"group":"","version":"","kind":"Namespace"},"scope":"Cluster","singularResource":"namespace","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["ns"],`+
		`"subresources":[{"subresource":"finalize","responseKind":{"group":"","version":"","kind":"Namespace"},"verbs":["update"]},`+
		`{"subresource":"status","responseKind":{"group":"","version":"","kind":"Namespace"},"verbs":["get","patch","update"]}]}`+
		`],"freshness":"Current"}]}]}`+"\n" {
		t.Errorf("/api aggregated: %d %s", r.code, r.body)
	}
}

func TestOpenAPI(t *testing.T) {
	base := startServer(t, nil)
	r := do(t, "GET", base+"/openapi/v3", "")
	if r.code != 200 || r.header.Get("Cache-Control") != "no-cache, private" {
		t.Fatalf("index: %d %v %s", r.code, r.header, r.body)
	}
	m := decodeMap(t, r.body)
	entry, ok := m["paths"].(map[string]any)["apis/coordination.k8s.io/v1"].(map[string]any)
	if !ok {
		t.Fatalf("index: %s", r.body)
	}
	hashed := entry["serverRelativeURL"].(string)
	prefix := "/openapi/v3/apis/coordination.k8s.io/v1?hash="
	if !strings.HasPrefix(hashed, prefix) || len(hashed) != len(prefix)+128 {
		t.Fatalf("url %q", hashed)
	}
	r = do(t, "GET", base+hashed, "", "Accept: application/json")
	if r.code != 200 || r.header.Get("Cache-Control") != "public, immutable" || r.header.Get("Expires") == "" ||
		r.header.Get("Etag") != `"`+hashed[len(prefix):]+`"` || r.header.Get("Content-Type") != "application/json" ||
		!strings.Contains(r.body, `"openapi":"3.0.0"`) {
		t.Errorf("hashed doc: %d %v %.200s", r.code, r.header, r.body)
	}
	r = do(t, "GET", base+"/openapi/v3/apis/coordination.k8s.io/v1", "", "If-None-Match: "+r.header.Get("Etag"))
	if r.code != 304 || r.header.Get("Cache-Control") != "no-cache, private" {
		t.Errorf("304: %d %v", r.code, r.header)
	}
	// A stale hash redirects to the current one.
	req := base + prefix + "00"
	c := *httpClientNoRedirect()
	resp, err := c.Get(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 301 || resp.Header.Get("Location") != hashed {
		t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if r := do(t, "GET", base+"/openapi/v3/apis/foo/v1", ""); r.code != 404 {
		t.Errorf("unknown doc: %d", r.code)
	}
	r = do(t, "GET", base+"/openapi/v2", "")
	if r.code != 200 || !strings.Contains(r.body, `"swagger":"2.0"`) {
		t.Errorf("v2: %d %.100s", r.code, r.body)
	}
	jsonTag := r.header.Get("Etag")
	// The protobuf form, as kubectl's validation and client-go's
	// OpenAPISchema ask for it: gnostic's message, the JSON's ETag.
	for _, accept := range []string{
		"application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
		"application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
		"application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
	} {
		r := do(t, "GET", base+"/openapi/v2", "", "Accept: "+accept)
		if r.code != 200 || r.header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" ||
			r.header.Get("Etag") != jsonTag || r.header.Get("Vary") != "Accept" {
			t.Fatalf("v2 protobuf (Accept %s): %d %v", accept, r.code, r.header)
		}
		var doc openapi_v2.Document
		if err := proto.Unmarshal([]byte(r.body), &doc); err != nil {
			t.Fatalf("v2 protobuf (Accept %s): %v", accept, err)
		}
		found := false
		for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
			found = found || d.GetName() == "io.k8s.api.coordination.v1.Lease"
		}
		if doc.GetSwagger() != "2.0" || !found {
			t.Errorf("v2 protobuf (Accept %s): swagger %q, Lease defined %v", accept, doc.GetSwagger(), found)
		}
	}
	r = do(t, "GET", base+"/openapi/v2", "", "Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "If-None-Match: "+jsonTag)
	if r.code != 304 {
		t.Errorf("v2 protobuf If-None-Match: %d", r.code)
	}
	if r := do(t, "GET", base+"/openapi/v2", "", "Accept: application/json;q=0.9, application/com.github.proto-openapi.spec.v2@v1.0+protobuf;q=0.5"); r.code != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("v2 preferring JSON: %d %v", r.code, r.header)
	}
	if r := do(t, "GET", base+"/openapi/v2", "", "Accept: application/yaml"); r.code != 406 {
		t.Errorf("v2 as YAML: %d, want 406 as kube-openapi", r.code)
	}
}

func TestVersionAndHealth(t *testing.T) {
	var ready error
	base := startServer(t, func(o *web.Options) { o.Ready = func() error { return ready } })
	r := do(t, "GET", base+"/version", "")
	if want := wireSample(t, "version.json"); r.code != 200 || r.body != want ||
		r.header.Get("Content-Type") != "application/json" {
		t.Errorf("version: %d %v %s", r.code, r.header, r.body)
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/readyz/ping", "/healthz/storage"} {
		r := do(t, "GET", base+p, "")
		r.expect(t, 200, "ok")
		if p[len(p)-1] == 'z' && r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s headers: %v", p, r.header)
		}
	}
	do(t, "GET", base+"/readyz?verbose", "").expect(t, 200, "[+]ping ok\n[+]log ok\n[+]storage ok\n[+]stored-objects ok\n[+]shutdown ok\nreadyz check passed\n")
	do(t, "GET", base+"/livez?verbose&exclude=log&exclude=nope", "").expect(t, 200,
		"[+]ping ok\n[+]log excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nlivez check passed\n")
	ready = errors.New("store closed")
	do(t, "GET", base+"/readyz", "").expect(t, 500, "[+]ping ok\n[+]log ok\n[-]storage failed: reason withheld\n[+]stored-objects ok\n[+]shutdown ok\nreadyz check failed\n")
	do(t, "GET", base+"/readyz/storage", "").expect(t, 500, "internal server error: store closed\n")
	do(t, "GET", base+"/livez", "").expect(t, 200, "ok")
	do(t, "GET", base+"/healthz/nope", "").expect(t, 404, "404 page not found\n")
}
