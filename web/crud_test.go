package web_test

import (
	"encoding/json"
	"strings"
	"testing"
)

const leaseBody = `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"my-lease","labels":{"app":"demo"}},"spec":{"holderIdentity":"holder-a","leaseDurationSeconds":15}}`

// decodeMap parses a JSON body.
func decodeMap(t testing.TB, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return m
}

func TestCRUD(t *testing.T) {
	base := startServer(t, nil)
	u := base + leasesPath

	r := do(t, "POST", u, leaseBody, "Content-Type: application/json")
	if r.code != 201 || !strings.HasSuffix(r.body, "}\n") || strings.Contains(r.body, "\n ") {
		t.Fatalf("create: %d %q", r.code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	created := decodeMap(t, r.body)
	md := created["metadata"].(map[string]any)
	rv := md["resourceVersion"].(string)

	// Exact upstream errors.
	do(t, "POST", u, leaseBody, "Content-Type: application/json").expect(t, 409, wireSample(t, "status-409-alreadyexists.json")+"\n")
	do(t, "GET", u+"/nope", "").expect(t, 404, wireSample(t, "status-404-notfound.json")+"\n")
	// curl's User-Agent gets indented JSON without a trailing newline.
	pretty := wireSample(t, "status-404-notfound.pretty.json")
	do(t, "GET", u+"/nope", "", "User-Agent: curl/8.5.0").expect(t, 404, pretty)
	do(t, "GET", u+"/nope?pretty=true", "").expect(t, 404, pretty)
	do(t, "GET", u+"/nope?pretty=false", "", "User-Agent: curl/8.5.0").expect(t, 404, wireSample(t, "status-404-notfound.json")+"\n")

	// The field order and shape follow k8s.io/api (compare key order with
	// testdata/wire).
	r = do(t, "GET", u+"/my-lease", "")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"my-lease","namespace":"default","uid":"`) {
		t.Fatalf("get: %d %s", r.code, r.body)
	}

	// YAML.
	r = do(t, "GET", u+"/my-lease", "", "Accept: application/yaml")
	if r.code != 200 || r.header.Get("Content-Type") != "application/yaml" || !strings.HasPrefix(r.body, "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n") {
		t.Errorf("yaml: %d %v %q", r.code, r.header, r.body)
	}

	// Update with a stale resourceVersion: 409 as upstream.
	stale := `{"metadata":{"name":"my-lease","resourceVersion":"1"},"spec":{"holderIdentity":"b"}}`
	if rv == "1" {
		stale = strings.Replace(stale, `"1"`, `"999"`, 1)
	}
	do(t, "PUT", u+"/my-lease", stale, "Content-Type: application/json").expect(t, 409, wireSample(t, "status-409-conflict.json")+"\n")
	// Name mismatch.
	do(t, "PUT", u+"/my-lease", `{"metadata":{"name":"zz"}}`).expect(t, 400,
		`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the name of the object (zz) does not match the name on the URL (my-lease)","reason":"BadRequest","code":400}`+"\n")
	// A good update: 200; PUT of a missing object creates: 201.
	r = do(t, "PUT", u+"/my-lease", `{"metadata":{"name":"my-lease","resourceVersion":"`+rv+`"},"spec":{"holderIdentity":"holder-b"}}`)
	if r.code != 200 || !strings.Contains(r.body, `"holderIdentity":"holder-b"`) {
		t.Errorf("update: %d %s", r.code, r.body)
	}
	r = do(t, "PUT", u+"/other", `{"metadata":{"name":"other"},"spec":{}}`)
	if r.code != 201 {
		t.Errorf("update-create: %d %s", r.code, r.body)
	}

	// Patches.
	r = do(t, "PATCH", u+"/my-lease", `{"spec":{"leaseDurationSeconds":30}}`, "Content-Type: application/merge-patch+json")
	if r.code != 200 || !strings.Contains(r.body, `"leaseDurationSeconds":30`) {
		t.Errorf("merge patch: %d %s", r.code, r.body)
	}
	r = do(t, "PATCH", u+"/my-lease", `[{"op":"replace","path":"/spec/holderIdentity","value":"c"}]`, "Content-Type: application/json-patch+json")
	if r.code != 200 || !strings.Contains(r.body, `"holderIdentity":"c"`) {
		t.Errorf("json patch: %d %s", r.code, r.body)
	}
	r = do(t, "PATCH", u+"/applied?fieldManager=test", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: applied\nspec:\n  holderIdentity: x\n", "Content-Type: application/apply-patch+yaml")
	if r.code != 201 {
		t.Errorf("apply create: %d %s", r.code, r.body)
	}
	// force is only for apply: PatchOptions validation.
	r = do(t, "PATCH", u+"/my-lease?force=true", `{}`, "Content-Type: application/merge-patch+json")
	if r.code != 422 || !strings.Contains(r.body, `PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden`) {
		t.Errorf("force on merge patch: %d %s", r.code, r.body)
	}

	// Lists: items never null, Table, PartialObjectMetadataList.
	r = do(t, "GET", base+"/apis/coordination.k8s.io/v1/namespaces/empty/leases", "")
	if r.code != 200 || !strings.Contains(r.body, `"items":[]`) {
		t.Errorf("empty list: %d %s", r.code, r.body)
	}
	r = do(t, "GET", base+"/apis/coordination.k8s.io/v1/leases?limit=1", "", "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	if r.code != 200 || r.header.Get("Content-Type") != "application/json" || !strings.HasPrefix(r.body, `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"`) ||
		!strings.Contains(r.body, `"continue":"`) || !strings.Contains(r.body, `"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"applied","namespace":"default"`) {
		t.Errorf("table list: %d %v %s", r.code, r.header, r.body)
	}
	r = do(t, "GET", u+"/my-lease?includeObject=Object", "", "Accept: application/json;as=Table;v=v1beta1;g=meta.k8s.io")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"Table","apiVersion":"meta.k8s.io/v1beta1"`) || !strings.Contains(r.body, `"object":{"kind":"Lease","apiVersion":"coordination.k8s.io/v1"`) {
		t.Errorf("table v1beta1 includeObject=Object: %d %s", r.code, r.body)
	}
	r = do(t, "GET", u+"/my-lease?includeObject=Bogus", "", "Accept: application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != 400 || !strings.Contains(r.body, `Unable to convert to Table as requested`) {
		t.Errorf("bad includeObject: %d %s", r.code, r.body)
	}
	r = do(t, "GET", u, "", "Accept: application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"`) {
		t.Errorf("partial list: %d %s", r.code, r.body)
	}
	r = do(t, "GET", u, "", "Accept: application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
	if r.code != 406 || !strings.Contains(r.body, `you requested PartialObjectMetadata, but the requested object is a list (*v1.LeaseList)`) {
		t.Errorf("partial of a list: %d %s", r.code, r.body)
	}
	r = do(t, "GET", u+"/my-lease", "", "Accept: application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"my-lease"`) {
		t.Errorf("partial: %d %s", r.code, r.body)
	}

	// Bad query values: the conversion's text as a 400.
	do(t, "GET", u+"?limit=abc", "").expect(t, 400,
		`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"strconv.ParseInt: parsing \"abc\": invalid syntax","reason":"BadRequest","code":400}`+"\n")
	r = do(t, "GET", u+"/my-lease?timeout=abc", "")
	if r.code != 400 || !strings.Contains(r.body, `invalid timeout specified in the request URL - time: invalid duration \"abc\"`) {
		t.Errorf("bad timeout: %d %s", r.code, r.body)
	}

	// Delete: a Status, with DeleteOptions from the body or the query.
	r = do(t, "DELETE", u+"/my-lease", `{"propagationPolicy":"Background"}`, "Content-Type: application/json")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"my-lease","group":"coordination.k8s.io","kind":"leases","uid":"`) {
		t.Errorf("delete: %d %s", r.code, r.body)
	}
	r = do(t, "DELETE", u+"/other?gracePeriodSeconds=abc", "")
	if r.code != 400 {
		t.Errorf("delete with bad query: %d %s", r.code, r.body)
	}
	r = do(t, "DELETE", u+"/other", `{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Bogus"}`)
	if r.code != 422 || !strings.Contains(r.body, `DeleteOptions.meta.k8s.io \"\" is invalid`) {
		t.Errorf("delete with bad policy: %d %s", r.code, r.body)
	}
	r = do(t, "DELETE", u+"/other", `{"kind":"DeleteOptions","apiVersion":"v1"}`)
	if r.code != 200 {
		t.Errorf("delete with v1 options: %d %s", r.code, r.body)
	}
	do(t, "DELETE", u+"/other", `{`).expect(t, 400, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"couldn't get version/kind; json parse error: unexpected end of JSON input","reason":"BadRequest","code":400}`+"\n")
	r = do(t, "DELETE", u+"?labelSelector=nomatch%3Dx", "")
	if r.code != 200 || !strings.HasPrefix(r.body, `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{"resourceVersion":"`) || !strings.Contains(r.body, `"items":[]`) {
		t.Errorf("deletecollection: %d %s", r.code, r.body)
	}
}

func TestDecoding(t *testing.T) {
	base := startServer(t, nil)
	u := base + leasesPath
	status400 := func(msg string) string {
		b, _ := json.Marshal(msg)
		return `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":` + string(b) + `,"reason":"BadRequest","code":400}` + "\n"
	}
	// Missing apiVersion and kind default to the endpoint's.
	if r := do(t, "POST", u, `{"metadata":{"name":"a"},"spec":{}}`); r.code != 201 {
		t.Errorf("defaulted kind: %d %s", r.code, r.body)
	}
	do(t, "POST", u, `{"apiVersion":"coordination.k8s.io/v1beta1","kind":"Lease","metadata":{"name":"b"}}`).expect(t, 400,
		status400("the API version in the data (coordination.k8s.io/v1beta1) does not match the expected API version (coordination.k8s.io/v1)"))
	do(t, "POST", u, `{"metadata":{"name":"b"},"spec":{"leaseDurationSeconds":3000000000}}`).expect(t, 400,
		status400(`Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal number 3000000000 into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32`))
	r := do(t, "POST", u, `{"metadata":{"name":"b"},"spec":{"renewTime":"2024-01-01T00:00:00Z"}}`)
	if r.code != 400 || !strings.Contains(r.body, `Lease in version \"v1\" cannot be handled as a Lease:`) {
		t.Errorf("MicroTime without 6 digits: %d %s", r.code, r.body)
	}
	dup := `{"metadata":{"name":"c"},"spec":{"foo":1,"holderIdentity":"a","holderIdentity":"b"}}`
	do(t, "POST", u+"?fieldValidation=Strict", dup).expect(t, 400,
		status400(`Lease in version "v1" cannot be handled as a Lease: strict decoding error: unknown field "spec.foo", duplicate field "spec.holderIdentity"`))
	r = do(t, "POST", u, dup)
	if w := r.header.Values("Warning"); r.code != 201 || len(w) != 2 || w[0] != `299 - "unknown field \"spec.foo\""` || w[1] != `299 - "duplicate field \"spec.holderIdentity\""` || !strings.Contains(r.body, `"holderIdentity":"b"`) {
		t.Errorf("Warn: %d %q %s", r.code, w, r.body)
	}
	r = do(t, "POST", u+"?fieldValidation=Ignore", strings.Replace(dup, `"c"`, `"d"`, 1))
	if r.code != 201 || len(r.header.Values("Warning")) != 0 {
		t.Errorf("Ignore: %d %v", r.code, r.header.Values("Warning"))
	}
	r = do(t, "POST", u+"?fieldValidation=Bogus", `{"metadata":{"name":"e"}}`)
	if r.code != 422 || !strings.Contains(r.body, `CreateOptions.meta.k8s.io \"\" is invalid`) {
		t.Errorf("bad fieldValidation: %d %s", r.code, r.body)
	}
	// YAML bodies.
	if r := do(t, "POST", u, "metadata:\n  name: yml\nspec:\n  holderIdentity: h\n", "Content-Type: application/yaml"); r.code != 201 {
		t.Errorf("yaml body: %d %s", r.code, r.body)
	}
	// Garbage.
	r = do(t, "POST", u, "[1]")
	if r.code != 400 || !strings.Contains(r.body, `the object provided is unrecognized (must be of type Lease)`) {
		t.Errorf("garbage: %d %s", r.code, r.body)
	}
	r = do(t, "POST", u, "\x00\x01", "Content-Type: application/vnd.kubernetes.protobuf")
	if r.code != 400 {
		t.Errorf("bad protobuf: %d %s", r.code, r.body)
	}
	// Bodies over the limit: upstream's 413.
	big := `{"metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 3<<20) + `"}}}`
	do(t, "POST", u, big).expect(t, 413,
		`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}`+"\n")
}

func TestDeprecationWarning(t *testing.T) {
	base := startServer(t, nil)
	r := do(t, "GET", base+"/apis/coordination.k8s.io/v1beta1/namespaces/default/leasecandidates/x", "")
	if w := r.header.Values("Warning"); r.code != 404 || len(w) != 1 || w[0] != `299 - "coordination.k8s.io/v1beta1 LeaseCandidate is deprecated in v1.36+, unavailable in v1.39+"` {
		t.Errorf("v1beta1 warning: %d %q", r.code, w)
	}
	if w := do(t, "GET", base+leasesPath+"/x", "").header.Values("Warning"); len(w) != 0 {
		t.Errorf("v1 Lease warned: %q", w)
	}
}

// TestRetryAfter: a Status with details.retryAfterSeconds sets the
// Retry-After header (a resourceVersion from the future times out).
func TestRetryAfter(t *testing.T) {
	base := startServer(t, nil)
	do(t, "POST", base+leasesPath, `{"metadata":{"name":"ra"}}`)
	r := do(t, "GET", base+leasesPath+"/ra?resourceVersion=99999999", "")
	if r.code != 504 || r.header.Get("Retry-After") != "1" || !strings.Contains(r.body, `"retryAfterSeconds":1`) {
		t.Errorf("got %d %v %s", r.code, r.header, r.body)
	}
}
