package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/discovery"
)

// apiNotFound is kube-apiserver's body for an unknown path under /api and
// /apis.
const apiNotFound = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`

// TestE2EAuthReviewsAllowAll runs kubectl auth can-i (--list) and whoami
// against a server without authentication, where everything is allowed,
// and checks what discovery shows of the reviews and the core group.
func TestE2EAuthReviewsAllowAll(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	k := newKubectl(t, ts)

	k.wantOutput("yes\n", "auth", "can-i", "get", "leases")
	k.wantOutput("yes\n", "auth", "can-i", "delete", "leases.coordination.k8s.io", "-n", "kube-system")
	k.wantOutput("yes\n", "auth", "can-i", "get", "/metrics")
	list := k.ok("auth", "can-i", "--list")
	if !strings.Contains(list, "*.*") || !strings.Contains(list, "[*]") {
		t.Errorf("kubectl auth can-i --list does not show everything allowed:\n%s", list)
	}
	var who authenticationv1.SelfSubjectReview
	if err := json.Unmarshal([]byte(k.ok("auth", "whoami", "-o", "json")), &who); err != nil {
		t.Fatal(err)
	}
	if who.Status.UserInfo.Username != "system:anonymous" || !slices.Equal(who.Status.UserInfo.Groups, []string{"system:unauthenticated"}) {
		t.Errorf("whoami = %+v, want system:anonymous in system:unauthenticated", who.Status.UserInfo)
	}

	// kubectl api-resources and client-go discovery see the reviews and
	// the core group without error.
	resources := k.ok("api-resources", "--no-headers")
	for _, want := range []string{"leases", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"} {
		if !strings.Contains(resources, want) {
			t.Errorf("kubectl api-resources lacks %s:\n%s", want, resources)
		}
	}
	for _, aggregated := range []bool{true, false} {
		cfg := restConfig(t, ts, wireJSON)
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dc.UseLegacyDiscovery = !aggregated
		groups, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("ServerGroupsAndResources (aggregated %v): %v", aggregated, err)
		}
		var names []string
		for _, g := range groups {
			names = append(names, g.Name+"="+g.PreferredVersion.GroupVersion)
		}
		for _, want := range []string{"=v1", "authentication.k8s.io=authentication.k8s.io/v1", "authorization.k8s.io=authorization.k8s.io/v1", "coordination.k8s.io=coordination.k8s.io/v1"} {
			if !slices.Contains(names, want) {
				t.Errorf("aggregated %v: groups %v lack %s", aggregated, names, want)
			}
		}
		for _, l := range lists {
			if l.GroupVersion != "authorization.k8s.io/v1" {
				continue
			}
			for _, r := range l.APIResources {
				if r.Namespaced || !slices.Equal(r.Verbs, []string{"create"}) {
					t.Errorf("aggregated %v: %s is %+v, want cluster-scoped with verbs [create]", aggregated, r.Name, r)
				}
			}
		}
	}

	// The wire, as kube-apiserver answers it.
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/api/v1/pods", "", 404, apiNotFound},
		{"GET", "/api/v2", "", 404, apiNotFound},
		{"GET", "/apis/unknown.example.com/v1/things", "", 404, apiNotFound},
		{"GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews/x", "", 404, apiNotFound},
		{"GET", "/nowhere", "", 404, "404 page not found\n"},
		{"GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "", 405,
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405}`},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", `{"spec":{}}`, 422,
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":".authorization.k8s.io \"\" is invalid: spec: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified","reason":"Invalid","details":{"group":"authorization.k8s.io","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified","field":"spec"}]},"code":422}`},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", `{"spec":{}}`, 400,
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"no namespace on request","reason":"BadRequest","code":400}`},
		{"GET", "/api", "", 200,
			`{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"` + strings.TrimPrefix(ts.URL, "http://") + `"}]}`},
		// The core group's list has no apiVersion, as kube-apiserver's.
		{"GET", "/api/v1", "", 200, `{"kind":"APIResourceList","groupVersion":"v1","resources":[` +
			`{"name":"events","singularName":"event","namespaced":true,"kind":"Event","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["ev"],"storageVersionHash":"r2yiGXH7wu8="},` +
			`{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["ns"],"storageVersionHash":"Q3oi5N2YM8M="},` +
			`{"name":"namespaces/finalize","singularName":"","namespaced":false,"kind":"Namespace","verbs":["update"]},` +
			`{"name":"namespaces/status","singularName":"","namespaced":false,"kind":"Namespace","verbs":["get","patch","update"]}]}`},
	} {
		code, body := plainRequest(t, c.method, ts.URL+c.path, c.body)
		if c.want[0] == '{' {
			body = compact(t, body)
		}
		if code != c.code || body != c.want {
			t.Errorf("%s %s = %d %s\nwant %d %s", c.method, c.path, code, body, c.code, c.want)
		}
	}
	// A review answers 201 with the spec echoed and the status filled,
	// and the managedFields kube-apiserver's field manager records (its
	// time normalised).
	code, body := plainRequest(t, "POST", ts.URL+"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"nonResourceAttributes":{"path":"/healthz","verb":"get"}}}`)
	body = regexp.MustCompile(`"time":"[^"]*"`).ReplaceAllString(compact(t, body), `"time":"T"`)
	if want := `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"managedFields":[{"manager":"Go-http-client","operation":"Update","apiVersion":"authorization.k8s.io/v1","time":"T","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:nonResourceAttributes":{".":{},"f:path":{},"f:verb":{}}}}}]},"spec":{"nonResourceAttributes":{"path":"/healthz","verb":"get"}},"status":{"allowed":true}}`; code != 201 || body != want {
		t.Errorf("SelfSubjectAccessReview = %d %s\nwant 201 %s", code, body, want)
	}
}

// TestE2EAuthReviewsABAC checks that with an ABAC policy the reviews
// answer what the policy grants: a read-only user may get but not delete,
// sees its read-only rules, and may create the reviews although its
// policy grants no create.
func TestE2EAuthReviewsABAC(t *testing.T) {
	t.Parallel()
	s := startSecureServer(t, "--write-kubeconfig-user", "admin")
	k := newKubectl(t, s.testServer)
	k.wantOutput("yes\n", "auth", "can-i", "delete", "leases")

	k.kubeconfig = userKubeconfig(t, s, readerToken)
	k.wantOutput("yes\n", "auth", "can-i", "get", "leases", "-n", "edge")
	k.wantOutput("yes\n", "auth", "can-i", "list", "/metrics")
	if code, out, errOut := k.run("auth", "can-i", "delete", "leases"); code != 1 || out != "no - No policy matched.\n" {
		t.Errorf("reader can-i delete leases = %d %q %s, want 1 \"no - No policy matched.\"", code, out, errOut)
	}
	if code, out, errOut := k.run("auth", "can-i", "create", "/leasehold/v1/backup"); code != 1 || !strings.HasPrefix(out, "no") {
		t.Errorf("reader can-i create /leasehold/v1/backup = %d %q %s, want no", code, out, errOut)
	}
	list := k.ok("auth", "can-i", "--list", "-n", "edge")
	if !strings.Contains(list, "[get list watch]") || strings.Contains(list, "[*]\n") {
		t.Errorf("reader can-i --list shows other than read-only rules:\n%s", list)
	}
	var who authenticationv1.SelfSubjectReview
	if err := json.Unmarshal([]byte(k.ok("auth", "whoami", "-o", "json")), &who); err != nil {
		t.Fatal(err)
	}
	if u := who.Status.UserInfo; u.Username != "reader" || u.UID != "uid-2" || !slices.Equal(u.Groups, []string{"readers", "system:authenticated"}) {
		t.Errorf("reader whoami = %+v", u)
	}

	// The rules review over the wire, as upstream's ABAC resolver lists it.
	code, body := s.do(t, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", readerToken, false,
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"edge"}}`)
	var rules authorizationv1.SelfSubjectRulesReview
	if err := json.Unmarshal([]byte(body), &rules); code != 201 || err != nil {
		t.Fatalf("rules review = %d %s (%v)", code, body, err)
	}
	want := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"get", "list", "watch"}, NonResourceURLs: []string{"*"}}},
	}
	if got, _ := json.Marshal(rules.Status); string(got) != mustJSON(t, want) {
		t.Errorf("reader rules = %s, want %s", got, mustJSON(t, want))
	}
	// Without credentials there is no self to review.
	if code, _ := s.do(t, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "", false, `{}`); code != 401 {
		t.Errorf("anonymous SelfSubjectReview = %d, want 401", code)
	}
}

// TestE2EMetricsExposition parses /metrics with Prometheus' own text
// parser: it must parse, and every family must say what it measures and
// what type it is.
func TestE2EMetricsExposition(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "--metrics-per-lease")
	// A write first, so that the request, commit and per-lease series exist.
	if code, body := plainRequest(t, "POST", ts.URL+"/apis/coordination.k8s.io/v1/namespaces/default/leases",
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"m1"},"spec":{"holderIdentity":"a"}}`); code != 201 {
		t.Fatalf("create lease = %d %s", code, body)
	}
	code, body := plainRequest(t, "GET", ts.URL+"/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics = %d %s", code, body)
	}
	parser := expfmt.TextParser{}
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	for _, want := range []string{"leasehold_http_requests_total", "leasehold_watch_streams", "leasehold_storage_commit_writes_total", "go_goroutines", "process_start_time_seconds"} {
		if families[want] == nil {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for name, f := range families {
		if strings.TrimSpace(f.GetHelp()) == "" {
			t.Errorf("%s has no # HELP text", name)
		}
		if !strings.Contains(body, "# TYPE "+name+" ") || f.GetType().String() == "UNTYPED" {
			t.Errorf("%s has no # TYPE line", name)
		}
		if !model.IsValidLegacyMetricName(name) {
			t.Errorf("%s is not a valid metric name", name)
		}
	}
}

// plainRequest sends one request without credentials (JSON body when
// body is set) and returns the status and body.
func plainRequest(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// userKubeconfig writes a kubeconfig that talks to s as the token's user.
func userKubeconfig(t *testing.T, s *secureServer, token string) string {
	t.Helper()
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, s.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "kubeconfig", "--server", s.base, "--token-file", tokenFile, "--certificate-authority", caFile)
	if code != 0 {
		t.Fatalf("leasehold kubeconfig: %d %s", code, errOut)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
