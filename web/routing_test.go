package web_test

import (
	"net/http"
	"strings"
	"testing"
)

const (
	leasesPath = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	status404  = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}` + "\n"
	status405  = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405}` + "\n"
)

func TestRouting(t *testing.T) {
	base := startServer(t, nil)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		// Paths outside /api and /apis: Go's plain 404.
		{"GET", "/nope", 404, "404 page not found\n"},
		{"GET", "/apisnope", 404, "404 page not found\n"},
		// Unknown groups, versions and resources under /api and /apis: a
		// Status 404.
		{"GET", "/apis/foo.k8s.io", 404, status404},
		{"GET", "/apis//v1", 404, status404},
		{"GET", "/api/v2", 404, status404},
		{"GET", "/api/v1/pods", 404, status404},
		{"GET", "/api/v1/namespaces/default/pods", 404, status404},
		// A namespace's subresources are not served.
		{"GET", "/api/v1/namespaces/default/finalize", 405, status405},
		{"PATCH", "/api/v1/namespaces/default/finalize", 405, status405},
		{"POST", "/api/v1/namespaces/default/status", 405, status405},
		{"GET", "/api/v1/namespaces/default/bogus", 404, status404},
		// Namespaces have no deletecollection.
		{"DELETE", "/api/v1/namespaces", 405, status405},
		// Inside the served group: a Status 404.
		{"GET", "/apis/coordination.k8s.io/v2", 404, status404},
		{"GET", "/apis/coordination.k8s.io/v1/foos", 404, status404},
		{"GET", leasesPath + "/x/status", 404, status404},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/default", 404, status404},
		{"GET", "/apis/coordination.k8s.io/v1/leases/x", 404, status404},
		{"GET", "/apis/coordination.k8s.io/v1/watch", 404, status404},
		// LeaseCandidate is not served in v1.
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/default/leasecandidates", 404, status404},
		// Methods a route does not have.
		{"POST", leasesPath + "/x", 405, status405},
		{"PUT", leasesPath, 405, status405},
		{"PATCH", leasesPath, 405, status405},
		{"POST", "/apis/coordination.k8s.io/v1/leases", 405, status405},
		{"DELETE", "/apis/coordination.k8s.io/v1/leases", 405, status405},
		{"POST", "/apis/coordination.k8s.io/v1/watch/namespaces/default/leases", 405, status405},
		// A named GET with ?watch=true is still a GET.
		{"GET", leasesPath + "/nope?watch=true", 404, wireSample(t, "status-404-notfound.json") + "\n"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := do(t, tc.method, base+tc.path, "")
			r.expect(t, tc.code, tc.body)
			if r.header.Get("Audit-Id") == "" || r.header.Get("Cache-Control") != "no-cache, private" {
				t.Errorf("missing generic headers: %v", r.header)
			}
			if tc.code == 404 && tc.body[0] == '4' {
				if r.header.Get("Content-Type") != "text/plain; charset=utf-8" || r.header.Get("X-Content-Type-Options") != "nosniff" {
					t.Errorf("plain 404 headers: %v", r.header)
				}
			}
		})
	}
}

func TestNegotiationErrors(t *testing.T) {
	base := startServer(t, nil)
	// go-restful's 406, written by the fallback writer (indented JSON)
	// because nothing in the Accept header is acceptable.
	want406 := "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n" +
		"  \"message\": \"406: Not Acceptable\\n\\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf\",\n" +
		"  \"reason\": \"NotAcceptable\",\n  \"details\": {},\n  \"code\": 406\n}"
	do(t, "GET", base+leasesPath+"/x", "", "Accept: text/html").expect(t, 406, want406)

	// The list route also produces the watch stream types.
	r := do(t, "GET", base+leasesPath, "", "Accept: text/html")
	if r.code != 406 || !strings.Contains(r.body, `application/vnd.kubernetes.protobuf, application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"`) {
		t.Errorf("list 406: %d %s", r.code, r.body)
	}

	// A known type with an unknown conversion: negotiation's 406.
	want := "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n" +
		"  \"message\": \"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf\",\n" +
		"  \"reason\": \"NotAcceptable\",\n  \"code\": 406\n}"
	do(t, "GET", base+leasesPath+"/x", "", "Accept: application/json;as=Foo;v=v1;g=meta.k8s.io").expect(t, 406, want)
	// Table is JSON/YAML only.
	do(t, "GET", base+leasesPath+"/x", "", "Accept: application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io").expect(t, 406, want)

	// Bodies in an unknown format.
	do(t, "POST", base+leasesPath, "{}", "Content-Type: text/plain").expect(t, 415,
		`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf","reason":"UnsupportedMediaType","code":415}`+"\n")
	// PATCH types are checked by the router.
	want415 := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"415: Unsupported Media Type","reason":"UnsupportedMediaType","details":{},"code":415}` + "\n"
	do(t, "PATCH", base+leasesPath+"/x", "{}", "Content-Type: application/json").expect(t, 415, want415)
	do(t, "PATCH", base+leasesPath+"/x", "{}").expect(t, 415, want415)
	// Parameters after ";" do not matter for a patch type.
	r = do(t, "PATCH", base+leasesPath+"/x", "{}", "Content-Type: application/merge-patch+json; charset=utf-8")
	if r.code != http.StatusNotFound {
		t.Errorf("merge patch of a missing lease: %d %s", r.code, r.body)
	}
}
