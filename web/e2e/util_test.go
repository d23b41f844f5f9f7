package e2e

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Content types a client-go test can speak. The typed clientset sends
// protobuf unless told otherwise, as every Kubernetes component does.
const (
	wireProtobuf = ""
	wireJSON     = "application/json"
)

// restConfig loads the kubeconfig the server wrote, as a user would, and
// sets the wire format. Client-side rate limiting is off: the defaults (5
// QPS) would make the tests measure the limiter instead of the server.
func restConfig(t testing.TB, ts *testServer, contentType string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", ts.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", ts.Kubeconfig, err)
	}
	if cfg.Host != ts.URL {
		t.Fatalf("kubeconfig server = %q, want %q", cfg.Host, ts.URL)
	}
	cfg.ContentType = contentType
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "leasehold-e2e/v0.0.0"
	return cfg
}

// clientset is a typed clientset on cfg.
func clientset(t testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("new clientset: %v", err)
	}
	return cs
}

// wireName names a content type in subtest names.
func wireName(contentType string) string {
	if contentType == wireJSON {
		return "json"
	}
	return "protobuf"
}

// apiStatus extracts the Status carried by a client-go error.
func apiStatus(t testing.TB, err error) metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) carries no API Status", err, err)
	}
	return se.Status()
}

// wantStatus checks an error's code, reason and exact message.
func wantStatus(t testing.TB, what string, err error, code int32, reason metav1.StatusReason, message string) metav1.Status {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %d %s", what, code, reason)
	}
	st := apiStatus(t, err)
	if st.Code != code || st.Reason != reason || st.Message != message || st.Status != metav1.StatusFailure {
		t.Errorf("%s: got status %d %q %q message %q\nwant %d %q %q message %q",
			what, st.Code, st.Status, st.Reason, st.Message, code, metav1.StatusFailure, reason, message)
	}
	return st
}

// wantDetails checks a Status's details name, group and kind.
func wantDetails(t testing.TB, what string, st metav1.Status, name, group, kind string) {
	t.Helper()
	d := st.Details
	if d == nil {
		t.Errorf("%s: status has no details, want name=%q group=%q kind=%q", what, name, group, kind)
		return
	}
	if d.Name != name || d.Group != group || d.Kind != kind {
		t.Errorf("%s: details name=%q group=%q kind=%q, want %q %q %q", what, d.Name, d.Group, d.Kind, name, group, kind)
	}
}

// rvLess reports whether resourceVersion a is older than b, checking both
// are valid kube-apiserver RVs (decimal, no leading zero).
func rvLess(t testing.TB, a, b string) bool {
	t.Helper()
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		t.Fatalf("compare resourceVersions %q and %q: %v", a, b, err)
	}
	return c < 0
}

// eventually polls cond every 20ms until it returns true or timeout passes;
// cond's last message explains the failure.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v: %s", what, timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requestLog records the requests a client sends (method and URL), to
// assert which protocol paths client-go took.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

// wrap installs the recorder on cfg.
func (l *requestLog) wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.reqs = append(l.reqs, r.Method+" "+r.URL.RequestURI())
			l.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
}

// matching returns the recorded requests containing every one of parts.
func (l *requestLog) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, r := range l.reqs {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// all returns every recorded request.
func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// warningLog captures Warning headers (rest.WarningHandler).
type warningLog struct {
	mu   sync.Mutex
	list []string
}

func (w *warningLog) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, strconv.Itoa(code)+"|"+agent+"|"+text)
}

func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// syncWriter is a bytes.Buffer safe for concurrent writers (server logs).
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
