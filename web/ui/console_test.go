package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// noSideways is the expression of "the page does not scroll sideways":
// neither the document nor the lease table is wider than its box.
const noSideways = `(() => { const w = document.querySelector('.table-wrap');
	return document.documentElement.scrollWidth <= innerWidth && (!w || w.scrollWidth <= w.clientWidth); })()`

// TestLayoutLongNames: long names are cut with an ellipsis on one line
// (the full name in the tooltip and on the detail page), and the overview
// never scrolls sideways from 1024 px up.
func TestLayoutLongNames(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	long := "payments-reconciliation-controller-primary-leader-election-eu-central-1a"
	holder := "payments-reconciliation-controller-7d9f8c6b5-x2k4p_4f1c2d9e-8b7a-4c3d-9e1f-0a2b3c4d5e6f"
	e.createLease(t, lease{ns: "kube-system", name: long, holder: holder, duration: 3600, renewed: time.Second, strategy: "OldestEmulationVersion"})
	e.createLease(t, lease{ns: "default", name: "gone-away", holder: "device-17", duration: 10, renewed: 11 * time.Minute, transitions: 6})
	for _, width := range []int64{1024, 1400} {
		ctx := newTab(t, width, 700)
		errs := consoleErrors(ctx)
		navigate(t, ctx, e.base+"/")
		waitFor(t, ctx, 5*time.Second, `document.querySelectorAll('#leases tbody tr').length === 2 && `+text("#conn")+` === 'Live'`, pageState)
		if !eval[bool](t, ctx, noSideways) {
			t.Errorf("at %d px the overview scrolls sideways: page %d, table %d in %d", width,
				eval[int](t, ctx, `document.documentElement.scrollWidth`), eval[int](t, ctx, `document.querySelector('.table-wrap').scrollWidth`),
				eval[int](t, ctx, `document.querySelector('.table-wrap').clientWidth`))
		}
		link := `document.querySelector('tr[data-key="kube-system/` + long + `"] .c-name a')`
		// One line, cut (its content is wider than its box), full name on hover.
		if got := eval[string](t, ctx, `(() => { const a = `+link+`; return [a.getClientRects().length, a.scrollWidth > a.clientWidth, a.title, Math.round(a.getBoundingClientRect().height / parseFloat(getComputedStyle(a).lineHeight))].join('|'); })()`); got != "1|true|kube-system/"+long+"|1" {
			t.Errorf("at %d px the long name: %q (want one cut line with the full name as its title)", width, got)
		}
		if got := eval[string](t, ctx, `document.querySelector('tr[data-key="kube-system/`+long+`"] .c-holder code').title`); got != holder {
			t.Errorf("holder tooltip %q", got)
		}
		// An expired lease says "expired … ago" and labels its holder as the last one.
		if got := eval[string](t, ctx, rowState("default/gone-away")); !strings.HasPrefix(got, "device-17|Expired|expired 1") || !strings.HasSuffix(got, " ago") {
			t.Errorf("expired row: %q", got)
		}
		if got := eval[string](t, ctx, text(`tr[data-key="default/gone-away"] .c-holder`)); !strings.Contains(got, "last holder") {
			t.Errorf("expired row's holder cell: %q", got)
		}
		if got := eval[string](t, ctx, text(`tr[data-key="kube-system/`+long+`"] .c-holder`)); strings.Contains(got, "last holder") {
			t.Errorf("a held lease's holder is labelled as the last one: %q", got)
		}
		noConsoleErrors(t, errs)
	}

	ctx := newTab(t, 1024, 800)
	navigate(t, ctx, e.base+"/ui/#/lease/default/gone-away")
	waitFor(t, ctx, 5*time.Second, text("#countdown")+`.startsWith('Last holder device-17 · expired 1')`, text("#countdown"))
	if got := eval[string](t, ctx, text("#fields")); !strings.Contains(got, "Holder\ndevice-17 (last holder: the lease expired)") {
		t.Errorf("detail fields of an expired lease:\n%s", got)
	}
	navigate(t, ctx, e.base+"/ui/#/lease/kube-system/"+long)
	waitFor(t, ctx, 5*time.Second, `document.querySelector('h1')?.innerText === '`+long+`'`, `document.querySelector('h1')?.innerText`)
	if !eval[bool](t, ctx, `document.documentElement.scrollWidth <= innerWidth`) {
		t.Errorf("the detail page of a long name scrolls sideways at 1024 px: %s", eval[string](t, ctx, `[...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > innerWidth).slice(0, 5).map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`))
	}
}

// TestDecisionSearch filters the decision history as one types.
func TestDecisionSearch(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	seed(t, e)
	ctx := newTab(t, 1280, 900)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/#/lease/edge/gateway")
	rows := `[...document.querySelectorAll('#history tbody tr')].filter(r => !r.hidden).length`
	waitFor(t, ctx, 5*time.Second, rows+` === 2`, pageState)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("history-q"), "OLDEST version")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 2*time.Second, rows+` === 1 && `+text("#history-count")+` === '1 of 2 decisions'`, text("#history-count"))
	if got := eval[string](t, ctx, `[...document.querySelectorAll('#history tbody tr')].find(r => !r.hidden).innerText`); !strings.Contains(got, "prefer") {
		t.Errorf("the matching decision: %q", got)
	}
	// It keeps filtering when the history is read again (a new resourceVersion).
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/gateway",
		map[string]any{"metadata": map[string]any{"labels": map[string]string{"touched": "yes"}}}, 200)
	waitFor(t, ctx, 5*time.Second, text("#fields")+`.includes('touched=yes')`, text("#fields"))
	waitFor(t, ctx, 2*time.Second, rows+` === 1`, text("#history-count"))
	noConsoleErrors(t, errs)
}

// TestModuleStates: the system page shows each module's state and signer,
// and a refused module's row is marked as such.
func TestModuleStates(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := newTab(t, 1280, 900)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/#/system")
	waitFor(t, ctx, 5*time.Second, `document.querySelectorAll('#modules tbody tr').length === 2`, pageState)
	row := func(name string) string {
		return eval[string](t, ctx, `document.querySelector('#modules tr[data-module="`+name+`"]').innerText`)
	}
	if got := row("oldest-emulation-version"); !strings.Contains(got, "loaded") || !strings.Contains(got, "unsigned") || !strings.Contains(got, "9f2b6c0d4e8a") {
		t.Errorf("loaded module row: %q", got)
	}
	if got := row("fastest-wins"); !strings.Contains(got, "refused: signature does not verify") || !strings.Contains(got, "edge-release-2026") || !strings.Contains(got, "5e1f0c3a9b7d") {
		t.Errorf("refused module row: %q", got)
	}
	if got := eval[string](t, ctx, `[...document.querySelectorAll('#modules tr.refused')].map(r => r.dataset.module).join(',')`); got != "fastest-wins" {
		t.Errorf("rows marked refused: %q", got)
	}
	noConsoleErrors(t, errs)
}
