package ui_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/web/ui"
)

// get serves one request through Handler.Serve without a network.
func get(t *testing.T, h *ui.Handler, method, uri string, hdr ...string) (*fasthttp.Response, bool) {
	t.Helper()
	var rc fasthttp.RequestCtx
	rc.Request.Header.SetMethod(method)
	rc.Request.SetRequestURI(uri)
	for _, kv := range hdr {
		k, v, _ := strings.Cut(kv, ": ")
		rc.Request.Header.Set(k, v)
	}
	served := h.Serve(&rc)
	return &rc.Response, served
}

func newHandler(t *testing.T, src ui.Sources) *ui.Handler {
	t.Helper()
	h, err := ui.New(ui.Options{Sources: src})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRootRedirectsToUI(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ui.Sources{})
	// Browsers, curl and anything else that asks for / land on the UI.
	for _, accept := range []string{"text/html,application/xhtml+xml,*/*;q=0.8", "application/json", "*/*", ""} {
		resp, served := get(t, h, "GET", "/", "Accept: "+accept)
		if !served || resp.StatusCode() != 302 || string(resp.Header.Peek("Location")) != "/ui/" {
			t.Errorf("GET / with Accept %q: served=%v %d %q", accept, served, resp.StatusCode(), resp.Header.Peek("Location"))
		}
	}
	if _, served := get(t, h, "POST", "/", "Accept: text/html"); served {
		t.Error("POST / was taken by the UI")
	}
	if _, served := get(t, h, "GET", "/apis"); served {
		t.Error("/apis was taken by the UI")
	}
}

func TestAssetsAndHeaders(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ui.Sources{})
	resp, _ := get(t, h, "GET", "/ui/")
	if resp.StatusCode() != 200 || string(resp.Header.Peek("Cache-Control")) != "no-cache" {
		t.Fatalf("index: %d %q", resp.StatusCode(), resp.Header.Peek("Cache-Control"))
	}
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self';",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Content-Type":            "text/html; charset=utf-8",
	} {
		if got := string(resp.Header.Peek(k)); !strings.HasPrefix(got, want) {
			t.Errorf("%s = %q, want prefix %q", k, got, want)
		}
	}
	body := string(resp.Body())
	i := strings.Index(body, `src="/ui/a/`)
	if i < 0 || strings.Contains(body, "{{ASSETS}}") {
		t.Fatalf("index does not name hashed assets:\n%s", body)
	}
	script := body[i+len(`src="`):]
	script = script[:strings.IndexByte(script, '"')]
	resp, _ = get(t, h, "GET", script, "Accept-Encoding: gzip")
	if resp.StatusCode() != 200 || string(resp.Header.Peek("Content-Type")) != "text/javascript; charset=utf-8" ||
		string(resp.Header.Peek("Cache-Control")) != "public, max-age=31536000, immutable" || string(resp.Header.Peek("Content-Encoding")) != "gzip" {
		t.Errorf("%s: %d %s", script, resp.StatusCode(), resp.Header.String())
	}
	// A page of an older build asks for another hash: 404, not stale code.
	old := strings.Replace(script, "/ui/a/", "/ui/a/0000", 1)
	if resp, _ := get(t, h, "GET", old); resp.StatusCode() != 404 {
		t.Errorf("%s: %d, want 404", old, resp.StatusCode())
	}
	if resp, _ := get(t, h, "POST", "/ui/"); resp.StatusCode() != 405 {
		t.Errorf("POST /ui/: %d, want 405", resp.StatusCode())
	}
	if resp, _ := get(t, h, "GET", "/ui"); resp.StatusCode() != 301 || string(resp.Header.Peek("Location")) != "/ui/" {
		t.Errorf("/ui: %d %q", resp.StatusCode(), resp.Header.Peek("Location"))
	}
}

// TestPayloadSize keeps the UI small: edge devices serve it, often over
// slow links. What crosses the link is the gzipped size; the raw size is
// what the binary embeds.
func TestPayloadSize(t *testing.T) {
	t.Parallel()
	raw, gz := newHandler(t, ui.Sources{}).Size()
	t.Logf("UI assets: %d bytes, %d gzipped", raw, gz)
	// The issue that added the operator actions and the timeline set the
	// budget: under 60 KB gzipped (it was 25 KiB before them).
	if raw > 128<<10 || gz > 60_000 {
		t.Errorf("UI assets grew to %d bytes (%d gzipped); keep them under 128 KiB (60 KB gzipped)", raw, gz)
	}
}

func TestAPIWithoutSources(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ui.Sources{})
	resp, _ := get(t, h, "GET", "/ui/api/v1/namespaces/default/leases/x/decisions")
	if resp.StatusCode() != 200 || string(resp.Body()) != `{"available":false,"items":[],"holders":null,"timeline":null}` {
		t.Errorf("decisions without a source: %d %s", resp.StatusCode(), resp.Body())
	}
	resp, _ = get(t, h, "GET", "/ui/api/v1/system")
	if b := string(resp.Body()); resp.StatusCode() != 200 || !strings.Contains(b, `"storage":null`) || !strings.Contains(b, `"modules":null`) || !strings.Contains(b, `"serverTime":"`) ||
		strings.Contains(b, `"cluster`) {
		t.Errorf("system without sources (a single device shows no cluster): %d %s", resp.StatusCode(), b)
	}
	for _, p := range []string{"/ui/api/v1/nope", "/ui/api/v1/namespaces//leases/x/decisions", "/ui/nope"} {
		if resp, _ := get(t, h, "GET", p); resp.StatusCode() != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode())
		}
	}
}

// TestSystemCluster: a member's system status carries its cluster's
// status as the source gives it, or the source's error.
func TestSystemCluster(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ui.Sources{Cluster: func(context.Context) (any, error) {
		return map[string]any{"self": "m1", "leader": "m2"}, nil
	}})
	resp, _ := get(t, h, "GET", "/ui/api/v1/system")
	if b := string(resp.Body()); resp.StatusCode() != 200 || !strings.Contains(b, `"cluster":{"leader":"m2","self":"m1"}`) {
		t.Errorf("system of a member: %d %s", resp.StatusCode(), b)
	}
	h = newHandler(t, ui.Sources{Cluster: func(context.Context) (any, error) { return nil, io.ErrUnexpectedEOF }})
	resp, _ = get(t, h, "GET", "/ui/api/v1/system")
	if b := string(resp.Body()); resp.StatusCode() != 200 || !strings.Contains(b, `"clusterError":"unexpected EOF"`) || strings.Contains(b, `"cluster":`) {
		t.Errorf("system of a member whose status fails: %d %s", resp.StatusCode(), b)
	}
}

func TestDecisionsErrorIsReported(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ui.Sources{Decisions: decisionsFunc(func(context.Context, string, string) ([]history.DecisionRecord, error) {
		return nil, io.ErrUnexpectedEOF
	})})
	resp, _ := get(t, h, "GET", "/ui/api/v1/namespaces/default/leases/x/decisions")
	if resp.StatusCode() != http.StatusInternalServerError || !strings.Contains(string(resp.Body()), "unexpected EOF") {
		t.Errorf("%d %s", resp.StatusCode(), resp.Body())
	}
}

// TestDecisionsRefuseImpossibleNames: a namespace that is no DNS-1123
// label or a name that is no DNS-1123 subdomain names no lease, so the
// history endpoint answers 404 with the reason, without reading storage.
func TestDecisionsRefuseImpossibleNames(t *testing.T) {
	t.Parallel()
	reads := 0
	h := newHandler(t, ui.Sources{Decisions: decisionsFunc(func(context.Context, string, string) ([]history.DecisionRecord, error) {
		reads++
		return nil, nil
	})})
	long := strings.Repeat("a", 254)
	for _, c := range []struct{ path, body string }{
		{"/ui/api/v1/namespaces/Default/leases/x/decisions",
			`{"message":"no lease can be in namespace \"Default\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"}`},
		{"/ui/api/v1/namespaces/" + strings.Repeat("n", 64) + "/leases/x/decisions",
			`{"message":"no lease can be in namespace \"` + strings.Repeat("n", 64) + `\": must be no more than 63 characters"}`},
		{"/ui/api/v1/namespaces/default/leases/a_b/decisions",
			`{"message":"no lease can be named \"a_b\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"}`},
		{"/ui/api/v1/namespaces/default/leases/" + long + "/decisions",
			`{"message":"no lease can be named \"` + long + `\": must be no more than 253 characters"}`},
	} {
		resp, _ := get(t, h, "GET", c.path)
		if resp.StatusCode() != http.StatusNotFound || string(resp.Body()) != c.body ||
			string(resp.Header.ContentType()) != "application/json" {
			t.Errorf("%.80s: %d %s\nwant 404 %s", c.path, resp.StatusCode(), resp.Body(), c.body)
		}
	}
	if reads != 0 {
		t.Errorf("storage read %d times for impossible names", reads)
	}
	resp, _ := get(t, h, "GET", "/ui/api/v1/namespaces/kube-system/leases/"+strings.Repeat("a", 253)+"/decisions")
	if resp.StatusCode() != http.StatusOK || string(resp.Body()) != `{"available":true,"items":[],"holders":null,"timeline":null}` || reads != 1 {
		t.Errorf("longest valid name: %d %s (reads %d)", resp.StatusCode(), resp.Body(), reads)
	}
}

// decisionsFunc serves a decision history read from a function, to make
// the read fail or count it; it records nothing.
type decisionsFunc func(ctx context.Context, ns, name string) ([]history.DecisionRecord, error)

func (f decisionsFunc) Decisions(ctx context.Context, ns, name string) ([]history.DecisionRecord, error) {
	return f(ctx, ns, name)
}

func (decisionsFunc) RecordDecision(context.Context, string, string, history.DecisionRecord, int) error {
	return errors.New("this test records no decisions")
}
