package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/valyala/fasthttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web/ui"
)

// TestHandOverPlainLease: a lease without LeaseCandidates is handed over
// as the README's kubectl line does (preferredHolder with a strategy the
// election controller leaves alone) to an identity the operator types;
// the page says done only when the lease shows that identity holding it,
// and says what happened when a holder undid it.
func TestHandOverPlainLease(t *testing.T) {
	t.Parallel()
	e := startAuthEnv(t)
	e.createLease(t, lease{ns: "default", name: "worker", holder: "w-1", duration: 10, renewed: time.Second, transitions: 1})
	ctx := newTab(t, 1280, 900)
	openAs(t, ctx, e, "alice-token", "#/lease/default/worker")
	errs := consoleErrors(ctx)
	waitFor(t, ctx, 5*time.Second, `document.getElementById('act-handover').disabled && `+text("#why-handover")+` === 'Name the identity to hand the lease over to.'`,
		text(`li[data-action="handover"]`))
	if got := eval[string](t, ctx, `document.getElementById('handover-to').hidden + ' ' + document.getElementById('handover-id').hidden`); got != "true false" {
		t.Errorf("the candidate list and the identity field hidden: %s", got)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("handover-id"), "w-2")); err != nil {
		t.Fatal(err)
	}
	want := `kubectl patch lease -n default worker --type=merge -p '{"spec":{"strategy":"leasehold.dev/manual","preferredHolder":"w-2"}}'`
	waitFor(t, ctx, 2*time.Second, `!document.getElementById('act-handover').disabled && `+text(`li[data-action="handover"] code`)+` === `+strconv.Quote(want),
		text(`li[data-action="handover"]`))
	click(t, ctx, "#act-handover")
	waitFor(t, ctx, 2*time.Second, `document.getElementById('action-dialog').open`, `'closed'`)
	if got := eval[string](t, ctx, text("#action-text")); !strings.Contains(got, "w-2 then has one lease duration to take it") || !strings.Contains(got, "A client-go elector ignores preferredHolder") {
		t.Errorf("the plain hand-over's dialog: %q", got)
	}
	if got := eval[string](t, ctx, text("#action-cmd")); got != want {
		t.Errorf("the plain hand-over's kubectl twin: %q", got)
	}
	// No election decides a plain lease: nothing to preview.
	if eval[bool](t, ctx, `!!document.getElementById('action-preview') || document.getElementById('action-confirm').disabled`) {
		t.Errorf("the plain hand-over waits for a preview: %s", eval[string](t, ctx, text("#action-result")))
	}
	click(t, ctx, "#action-confirm")
	waitFor(t, ctx, 5*time.Second, `!!document.getElementById('action-pending') && `+text("#action-audit")+`.startsWith('Recorded')`, text("#action-result"))
	got := string(e.request(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/worker", nil, http.StatusOK))
	if !strings.Contains(got, `"preferredHolder":"w-2"`) || !strings.Contains(got, `"strategy":"leasehold.dev/manual"`) || !strings.Contains(got, `"holderIdentity":"w-1"`) {
		t.Errorf("the lease after the hand-over: %s", got)
	}
	// leasehold run: w-1 releases keeping preferredHolder, w-2 takes it
	// and clears both. Done only then.
	path := "/apis/coordination.k8s.io/v1/namespaces/default/leases/worker"
	e.request(t, "PATCH", path, map[string]any{"spec": map[string]any{"holderIdentity": "", "leaseDurationSeconds": 1}}, http.StatusOK)
	time.Sleep(300 * time.Millisecond)
	if eval[bool](t, ctx, `!!document.getElementById('action-done') || !!document.getElementById('action-undone')`) {
		t.Errorf("the hand-over judged while the lease was free: %s", eval[string](t, ctx, text("#action-result")))
	}
	e.request(t, "PATCH", path, map[string]any{"spec": map[string]any{"holderIdentity": "w-2", "leaseDurationSeconds": 10, "preferredHolder": nil, "strategy": nil}}, http.StatusOK)
	waitFor(t, ctx, 5*time.Second, text("#action-done")+` === 'w-2 now holds default/worker.'`, text("#action-result"))
	click(t, ctx, "#action-cancel")

	// A client-go elector renews over it: preferredHolder is gone, the
	// holder stays, and the page says so instead of "done".
	eval[any](t, ctx, `(() => { const i = document.getElementById('handover-id'); i.value = ''; return 0; })()`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("handover-id"), "w-3")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 2*time.Second, `!document.getElementById('act-handover').disabled`, text(`li[data-action="handover"]`))
	click(t, ctx, "#act-handover")
	waitFor(t, ctx, 2*time.Second, `document.getElementById('action-dialog').open`, `'closed'`)
	click(t, ctx, "#action-confirm")
	waitFor(t, ctx, 5*time.Second, `!!document.getElementById('action-pending')`, text("#action-result"))
	e.request(t, "PATCH", path, map[string]any{"spec": map[string]any{"preferredHolder": nil, "strategy": nil}}, http.StatusOK)
	waitFor(t, ctx, 5*time.Second, `!!document.getElementById('action-undone')`, text("#action-result"))
	if got := eval[string](t, ctx, text("#action-undone")); got != "Not handed over: preferredHolder was cleared and w-2 still holds the lease (a client-go elector clears it as it renews)." {
		t.Errorf("the undone hand-over: %q", got)
	}
	noConsoleErrors(t, errs)
}

// post is get with a body.
func post(t *testing.T, h *ui.Handler, uri, contentType, body string) *fasthttp.Response {
	t.Helper()
	var rc fasthttp.RequestCtx
	rc.Request.Header.SetMethod("POST")
	rc.Request.SetRequestURI(uri)
	if contentType != "" {
		rc.Request.Header.SetContentType(contentType)
	}
	rc.Request.SetBodyString(body)
	if !h.Serve(&rc) {
		t.Fatalf("POST %s not served by the UI", uri)
	}
	return &rc.Response
}

// TestHandOverPreviewEndpoint: the preview endpoint's own rules, and its
// answer through a real election controller (engine, bbolt, the native
// OldestEmulationVersion) as main wires it.
func TestHandOverPreviewEndpoint(t *testing.T) {
	t.Parallel()
	const path = "/ui/api/v1/namespaces/edge/leases/gateway/handover-preview"
	bare := newHandler(t, ui.Sources{})
	for _, c := range []struct {
		method, uri, ct, body string
		code                  int
		msg                   string
	}{
		{"POST", path, "application/json", `{"candidate":"gw-1"}`, 501, "this server runs no election controller"},
		{"POST", path, "text/plain", `{"candidate":"gw-1"}`, 415, "JSON body"},
		{"POST", path, "application/json", `{}`, 400, "needs a candidate"},
		{"POST", path, "application/json", `{`, 400, "decoding the preview request"},
		{"POST", "/ui/api/v1/namespaces/Edge/leases/gateway/handover-preview", "application/json", `{"candidate":"gw-1"}`, 404, "no lease can be in namespace"},
	} {
		resp := post(t, bare, c.uri, c.ct, c.body)
		if resp.StatusCode() != c.code || !strings.Contains(string(resp.Body()), c.msg) {
			t.Errorf("%s %s (%s) %s: %d %s, want %d with %q", c.method, c.uri, c.ct, c.body, resp.StatusCode(), resp.Body(), c.code, c.msg)
		}
	}
	if resp, _ := get(t, bare, "GET", path); resp.StatusCode() != 405 || string(resp.Header.Peek("Allow")) != "POST" {
		t.Errorf("GET of the preview: %d, Allow %q", resp.StatusCode(), resp.Header.Peek("Allow"))
	}

	// Through a real controller.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := boltdb.Open(ctx, filepath.Join(t.TempDir(), "db"), boltdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	c, err := election.New(election.Options{Engine: eng, History: history.New(st, nil), Registry: election.NewStaticRegistry(election.NativeOldest)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	leases, _ := eng.ResourceFor(engine.GroupName, "v1", "leases")
	cands, _ := eng.ResourceFor(engine.GroupName, "v1beta1", "leasecandidates")
	now := metav1.NewMicroTime(time.Now())
	holder, dur, strategy := "gw-old", int32(3600), coordinationv1.CoordinatedLeaseStrategy("OldestEmulationVersion")
	if _, err := eng.Create(ctx, engine.Scope{Resource: leases, Version: "v1", Namespace: "edge"}, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now, AcquireTime: &now, Strategy: &strategy},
	}, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, emulation := range map[string]string{"gw-old": "1.36.0", "gw-new": "1.37.0"} {
		if _, err := eng.Create(ctx, engine.Scope{Resource: cands, Version: "v1beta1", Namespace: "edge"}, &coordinationv1beta1.LeaseCandidate{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: "gateway", BinaryVersion: "1.37.0", EmulationVersion: emulation,
				Strategy: strategy, RenewTime: &now},
		}, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h := newHandler(t, ui.Sources{HandOverPreview: c.PreviewHandOver})
	var p election.HandOverPreview
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := post(t, h, path, "application/json", `{"candidate":"gw-new"}`)
		if resp.StatusCode() == 200 {
			if err := json.Unmarshal(resp.Body(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Outcome == election.PreviewKeepsHolder {
				break
			}
		}
		// 503 until the controller listed everything; not-elected until
		// it saw both candidates.
		if time.Now().After(deadline) {
			t.Fatalf("preview: %d %s", resp.StatusCode(), resp.Body())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p.Keeps || p.Chosen != "gw-old" || p.Reason != "holder has the oldest versions" || p.Candidate != "gw-new" || p.Holder != "gw-old" {
		t.Errorf("preview: %+v", p)
	}
}
