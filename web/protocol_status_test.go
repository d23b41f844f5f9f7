package web_test

import (
	"strconv"
	"testing"
)

// statusBody is the compact JSON Status kube-apiserver writes for a
// failure without details: reason is left out when it is empty (an error
// that is not a Status, which upstream answers with code 500).
func statusBody(code int, reason, message string) string {
	r := ""
	if reason != "" {
		r = `,"reason":"` + reason + `"`
	}
	return `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":` + message + r + `,"code":` + strconv.Itoa(code) + "}\n"
}

// TestMalformedResourceVersionStatus pins the answers to a resourceVersion
// that is not a number, as kube-apiserver v1.37 gives them: a list
// validates it first (storage.ValidateListOptions: 400 "invalid resource
// version: "), while a get or a watch with one passes the watch cache's
// parse error on unconverted (500, no reason).
func TestMalformedResourceVersionStatus(t *testing.T) {
	base := startServer(t, nil)
	u := base + leasesPath
	wantCode(t, do(t, "POST", u, leaseBody, "Content-Type: application/json"), 201)
	for _, c := range []struct {
		method, path    string
		code            int
		reason, message string
	}{
		{"GET", "?resourceVersion=abc", 400, "BadRequest",
			`"invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"`},
		{"GET", "?resourceVersion=-1", 400, "BadRequest",
			`"invalid resource version: resourceVersion: Invalid value: \"-1\": strconv.ParseUint: parsing \"-1\": invalid syntax"`},
		{"GET", "?resourceVersion=abc&limit=1&resourceVersionMatch=Exact", 400, "BadRequest",
			`"invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"`},
		{"DELETE", "?resourceVersion=abc", 400, "BadRequest",
			`"invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"`},
		{"GET", "?watch=true&resourceVersion=abc", 500, "",
			`"resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"`},
		{"GET", "?watch=true&resourceVersion=-1", 500, "",
			`"resourceVersion: Invalid value: \"-1\": strconv.ParseUint: parsing \"-1\": invalid syntax"`},
		{"GET", "/my-lease?resourceVersion=abc", 500, "",
			`"resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"`},
		{"GET", "/my-lease?resourceVersion=-1", 500, "",
			`"resourceVersion: Invalid value: \"-1\": strconv.ParseUint: parsing \"-1\": invalid syntax"`},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			do(t, c.method, u+c.path, "").expect(t, c.code, statusBody(c.code, c.reason, c.message))
		})
	}
	// The list survives: none of the above touched the lease.
	wantCode(t, do(t, "GET", u+"/my-lease", ""), 200)
}

// TestMalformedBodiesStatus pins the answers to request bodies that do
// not decode or apply, as kube-apiserver v1.37 gives them.
func TestMalformedBodiesStatus(t *testing.T) {
	base := startServer(t, nil)
	u := base + leasesPath
	wantCode(t, do(t, "POST", u, leaseBody, "Content-Type: application/json"), 201)
	for _, c := range []struct {
		name, method, path, contentType, body string
		code                                  int
		reason, message                       string
	}{
		// handlers.DeleteResource: a DeleteOptions body that does not
		// decode is a BadRequest with the decoder's text.
		{"delete syntax", "DELETE", "/my-lease", "application/json", `{bad`, 400, "BadRequest",
			`"couldn't get version/kind; json parse error: invalid character 'b' looking for beginning of object key string"`},
		{"delete array", "DELETE", "/my-lease", "application/json", `[]`, 400, "BadRequest",
			`"couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }"`},
		{"delete field type", "DELETE", "/my-lease", "application/json", `{"gracePeriodSeconds":"x"}`, 400, "BadRequest",
			`"json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"`},
		{"delete wrong kind", "DELETE", "/my-lease", "application/json", `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1"}`, 400, "BadRequest",
			`"no kind \"Lease\" is registered for version \"coordination.k8s.io/v1\" in scheme \"pkg/apis/meta/internalversion/scheme/register.go:27\""`},
		{"deletecollection syntax", "DELETE", "", "application/json", `{bad`, 400, "BadRequest",
			`"couldn't get version/kind; json parse error: invalid character 'b' looking for beginning of object key string"`},
		// Store.Update parses the object's resourceVersion with
		// APIObjectVersioner.ObjectResourceVersion and passes the strconv
		// error on: 500 without reason.
		{"put rv syntax", "PUT", "/my-lease", "application/json",
			`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"my-lease","resourceVersion":"abc"}}`, 500, "",
			`"strconv.ParseUint: parsing \"abc\": invalid syntax"`},
		{"put rv syntax, new lease", "PUT", "/other", "application/json",
			`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"other","resourceVersion":"-1"}}`, 500, "",
			`"strconv.ParseUint: parsing \"-1\": invalid syntax"`},
		// mergepatch.ErrBadPatchType is not one of the errors
		// interpretStrategicMergePatchError converts: 500 without reason.
		{"smp bogus directive", "PATCH", "/my-lease", "application/strategic-merge-patch+json", `{"$patch":"bogus"}`, 500, "",
			`"unknown patch type: bogus in map: map[$patch:bogus]"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			do(t, c.method, u+c.path, c.body, "Content-Type: "+c.contentType).expect(t, c.code, statusBody(c.code, c.reason, c.message))
		})
	}
	wantCode(t, do(t, "GET", u+"/my-lease", ""), 200)
	wantCode(t, do(t, "GET", u+"/other", ""), 404)
}

// wantCode checks only the status code of a setup or follow-up request.
func wantCode(t testing.TB, r response, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("got %d %q, want %d", r.code, r.body, code)
	}
}
