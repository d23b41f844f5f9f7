package ui_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
