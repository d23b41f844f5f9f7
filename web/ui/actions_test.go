package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/web/auth"
)

// startAuthEnv starts a server with tokens and an ABAC policy: alice may
// do anything, bob may only read.
func startAuthEnv(t *testing.T) *env {
	t.Helper()
	tokens := auth.NewTokens([]auth.TokenEntry{
		{Token: "alice-token", User: auth.User{Name: "alice", Groups: []string{"system:authenticated"}}},
		{Token: "bob-token", User: auth.User{Name: "bob", Groups: []string{"system:authenticated"}}},
	})
	e := startEnvWith(t, envOptions{
		auth: &auth.Authenticator{Tokens: tokens},
		policies: auth.Policies{
			{User: "alice", Namespace: "*", Resource: "*", APIGroup: "*", NonResourcePath: "*"},
			{User: "bob", Readonly: true, Namespace: "*", Resource: "*", APIGroup: "*", NonResourcePath: "*"},
		},
	})
	e.token = "alice-token"
	return e
}

// seedCoordinated creates edge/gateway held by gw-2 with candidates gw-1
// and gw-2 (no election controller runs: nothing else touches it).
func seedCoordinated(t *testing.T, e *env) {
	t.Helper()
	e.createLease(t, lease{ns: "edge", name: "gateway", holder: "gw-2", strategy: "OldestEmulationVersion", duration: 3600, renewed: time.Second, transitions: 2})
	e.createCandidate(t, "edge", "gw-1", "gateway", "1.37.0", "1.36.0", 3*time.Second)
	e.createCandidate(t, "edge", "gw-2", "gateway", "1.37.0", "1.37.0", 4*time.Second)
}

// openAs opens a lease's detail page with a token in the tab.
func openAs(t *testing.T, ctx context.Context, e *env, token, hash string) {
	t.Helper()
	navigate(t, ctx, e.base+"/healthz") // the origin, without the page
	eval[any](t, ctx, `sessionStorage.setItem('leasehold.token', '`+token+`'), 0`)
	navigate(t, ctx, e.base+"/ui/"+hash)
	waitFor(t, ctx, 5*time.Second, text("#conn")+` === 'Live'`, pageState)
}

func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}

// confirmAction clicks an action, checks the confirmation names its
// kubectl twin, confirms, and waits until it is done and recorded.
func confirmAction(t *testing.T, ctx context.Context, action, kubectl, audit string) string {
	t.Helper()
	waitFor(t, ctx, 5*time.Second, `!document.getElementById('act-`+action+`').disabled`, text(`li[data-action="`+action+`"]`))
	click(t, ctx, "#act-"+action)
	waitFor(t, ctx, 2*time.Second, `document.getElementById('action-dialog').open`, `'closed'`)
	if got := eval[string](t, ctx, text("#action-cmd")); got != kubectl {
		t.Errorf("%s: the confirmation shows %q, want %q", action, got, kubectl)
	}
	click(t, ctx, "#action-confirm")
	waitFor(t, ctx, 5*time.Second, `!!document.getElementById('action-done') && `+text("#action-audit")+`.startsWith('Recorded')`, text("#action-result"))
	if got := eval[string](t, ctx, text("#action-audit")); !strings.Contains(got, audit) {
		t.Errorf("%s: audit line %q, want %q", action, got, audit)
	}
	obj := eval[string](t, ctx, `document.getElementById('action-object').textContent`)
	click(t, ctx, "#action-cancel") // "Close"
	waitFor(t, ctx, 2*time.Second, `!document.getElementById('action-dialog').open`, `'open'`)
	return obj
}

// TestActions hands a coordinated lease over, force-releases it and
// deletes it from the browser, as alice: each through the API, confirmed,
// the result shown, the kubectl twin offered, and recorded with her name.
func TestActions(t *testing.T) {
	t.Parallel()
	e := startAuthEnv(t)
	seedCoordinated(t, e)
	ctx := newTab(t, 1280, 900)
	openAs(t, ctx, e, "alice-token", "#/lease/edge/gateway")
	errs := consoleErrors(ctx)
	waitFor(t, ctx, 5*time.Second, `document.getElementById('handover-to')?.value === 'gw-1'`, text("#actions"))
	cmds := eval[string](t, ctx, `[...document.querySelectorAll('#actions code')].map(c => c.textContent).join('\n')`)
	want := `kubectl annotate lease -n edge gateway --overwrite 'leasehold.dev/step-down=gw-2'
kubectl patch lease -n edge gateway --type=merge -p '{"spec":{"holderIdentity":null}}'
kubectl patch lease -n edge gateway --type=merge -p '{"spec":{"preferredHolder":"gw-1"}}'
kubectl delete lease -n edge gateway`
	if cmds != want {
		t.Errorf("copy-as-kubectl lines:\n%s\nwant:\n%s", cmds, want)
	}
	screenshot(t, ctx, "actions")

	// Cancel does nothing.
	click(t, ctx, "#act-delete")
	waitFor(t, ctx, 2*time.Second, `document.getElementById('action-dialog').open`, `'closed'`)
	click(t, ctx, "#action-cancel")
	e.request(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/gateway", nil, http.StatusOK)

	// The hand-over: no election controller runs here, so the page says
	// it could not ask the strategy, and it is done only once the lease
	// shows gw-1 holding it.
	click(t, ctx, "#act-handover")
	waitFor(t, ctx, 5*time.Second, text("#action-preview")+`.startsWith('Could not ask the strategy')`, text("#action-result"))
	if got := eval[string](t, ctx, text("#action-preview")); !strings.Contains(got, "this server runs no election controller") {
		t.Errorf("the preview without a controller: %q", got)
	}
	if got := eval[string](t, ctx, text("#action-cmd")); got != `kubectl patch lease -n edge gateway --type=merge -p '{"spec":{"preferredHolder":"gw-1"}}'` {
		t.Errorf("the hand-over's kubectl twin: %q", got)
	}
	click(t, ctx, "#action-confirm")
	waitFor(t, ctx, 5*time.Second, `!!document.getElementById('action-pending') && `+text("#action-audit")+`.startsWith('Recorded')`, text("#action-result"))
	if got := eval[string](t, ctx, text("#action-audit")); !strings.Contains(got, "alice handed the lease over to gw-1 from the web UI") {
		t.Errorf("the hand-over's audit line: %q", got)
	}
	if got := eval[string](t, ctx, text("#action-pending")); got != "Asked gw-2 to hand edge/gateway over to gw-1. Waiting for gw-1 to hold it…" {
		t.Errorf("the hand-over before the lease changed: %q", got)
	}
	obj := eval[string](t, ctx, `document.getElementById('action-object').textContent`)
	if !strings.Contains(obj, "preferredHolder: gw-1") || !strings.Contains(obj, "holderIdentity: gw-2") {
		t.Errorf("the lease after the hand-over:\n%s", obj)
	}
	// gw-1 takes the lease over (written in one go here: a release
	// would be recorded as an operator's).
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/gateway", map[string]any{"spec": map[string]any{"holderIdentity": "gw-1", "preferredHolder": nil}}, http.StatusOK)
	waitFor(t, ctx, 5*time.Second, text("#action-done")+` === 'gw-1 now holds edge/gateway.'`, text("#action-result"))
	click(t, ctx, "#action-cancel")

	obj = confirmAction(t, ctx, "release", `kubectl patch lease -n edge gateway --type=merge -p '{"spec":{"holderIdentity":null}}'`,
		"alice force-released the lease from the web UI")
	if strings.Contains(obj, "holderIdentity") {
		t.Errorf("the lease after the release still has a holder:\n%s", obj)
	}
	// The decision history names who did what, newest first.
	hist := `[...document.querySelectorAll('#history tbody tr')].map(r => r.innerText.split('\t').slice(1).join('|')).join('\n')`
	waitFor(t, ctx, 5*time.Second, hist+`.split('\n').length === 2`, hist)
	if got := eval[string](t, ctx, hist); !strings.HasPrefix(got, "operator|release|—|operator alice|alice force-released the lease from the web UI|ok\noperator|handover|gw-1|operator alice|") {
		t.Errorf("decision history:\n%s", got)
	}
	recs, err := e.hist.Decisions(context.Background(), "edge", "gateway")
	if err != nil || len(recs) != 2 || recs[0].Holder != "gw-2" || recs[1].Action != "release" || recs[1].Holder != "gw-1" {
		t.Errorf("stored records: %v %+v", err, recs)
	}

	obj = confirmAction(t, ctx, "delete", `kubectl delete lease -n edge gateway`, "alice deleted the lease from the web UI")
	if !strings.Contains(obj, "name: gateway") {
		t.Errorf("the deleted object:\n%s", obj)
	}
	e.request(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/gateway", nil, http.StatusNotFound)
	waitFor(t, ctx, 5*time.Second, `document.getElementById('act-delete').disabled && `+text("#why-delete")+` === 'The lease does not exist.'`, text("#actions"))
	// Without an election controller the preview answers 501.
	noConsoleErrorsBut(t, errs, "/handover-preview")
}

// TestActionsStepDownOrForce: the two ways to take the lease from its
// holder. Asking it to step down goes through the holder (an annotation it
// honours) and is recorded; the forced release's dialog says what it
// costs before anything is sent.
func TestActionsStepDownOrForce(t *testing.T) {
	t.Parallel()
	e := startAuthEnv(t)
	seedCoordinated(t, e)
	ctx := newTab(t, 1280, 900)
	openAs(t, ctx, e, "alice-token", "#/lease/edge/gateway")
	errs := consoleErrors(ctx)
	waitFor(t, ctx, 5*time.Second, `!document.getElementById('act-stepdown').disabled`, text(`li[data-action="stepdown"]`))

	// The graceful way first: the holder is asked, through the lease.
	click(t, ctx, "#act-stepdown")
	waitFor(t, ctx, 2*time.Second, `document.getElementById('action-dialog').open`, `'closed'`)
	if got := eval[string](t, ctx, text("#action-title")+` + ' | ' + `+text("#action-text")+` + ' | ' + `+text("#action-confirm")); !strings.HasPrefix(got, "Ask gw-2 to step down from edge/gateway? | Ask gw-2 to step down") ||
		!strings.Contains(got, "releases the lease itself") || !strings.HasSuffix(got, "| Ask to step down") {
		t.Errorf("the step-down dialog: %q", got)
	}
	click(t, ctx, "#action-cancel")
	obj := confirmAction(t, ctx, "stepdown", `kubectl annotate lease -n edge gateway --overwrite 'leasehold.dev/step-down=gw-2'`,
		"alice asked gw-2 to step down from the web UI")
	if !strings.Contains(obj, "leasehold.dev/step-down: gw-2") || !strings.Contains(obj, "holderIdentity: gw-2") {
		t.Errorf("the lease after the step-down request:\n%s", obj)
	}

	// The forced release says what it costs before it is confirmed.
	click(t, ctx, "#act-release")
	waitFor(t, ctx, 2*time.Second, `document.getElementById('action-dialog').open`, `'closed'`)
	if got := eval[string](t, ctx, text("#action-title")+` + ' | ' + `+text("#action-text")); !strings.HasPrefix(got, "Force release edge/gateway? | Clear the holder of edge/gateway without asking gw-2.") ||
		!strings.Contains(got, "until gw-2's lease would have expired (its last renewal + 3600 s + a tenth for clock drift): the lease does no work until then") {
		t.Errorf("the force release dialog: %q", got)
	}
	click(t, ctx, "#action-cancel")
	if got := string(e.request(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/gateway", nil, http.StatusOK)); !strings.Contains(got, `"holderIdentity":"gw-2"`) {
		t.Errorf("the cancelled force release changed the lease: %s", got)
	}
	recs, err := e.hist.Decisions(context.Background(), "edge", "gateway")
	if err != nil || len(recs) != 1 || recs[0].Action != "stepdown" || recs[0].Holder != "gw-2" || recs[0].Reason != "alice asked gw-2 to step down from the web UI" {
		t.Errorf("stored records: %v %+v", err, recs)
	}
	noConsoleErrors(t, errs)
}

// TestActionsDenied: bob may only read. The page asks the server
// (SelfSubjectAccessReview) and disables every action with the reason;
// and when it acts anyway, the API's 403 is shown and nothing changes.
func TestActionsDenied(t *testing.T) {
	t.Parallel()
	e := startAuthEnv(t)
	seedCoordinated(t, e)
	ctx := newTab(t, 1280, 900)
	openAs(t, ctx, e, "bob-token", "#/lease/edge/gateway")
	for _, a := range []string{"stepdown", "release", "handover", "delete"} {
		verb := "patch"
		if a == "delete" {
			verb = "delete"
		}
		want := "Not allowed: your token may not " + verb + " leases in edge (No policy matched.)."
		waitFor(t, ctx, 5*time.Second, `document.getElementById('act-`+a+`').disabled && `+text("#why-"+a)+` === '`+want+`'`, text(`li[data-action="`+a+`"]`))
	}

	// Acting anyway (as a page whose review was wrong would): the API
	// refuses, the page says so, and the lease is untouched.
	eval[any](t, ctx, `(() => { const b = document.getElementById('act-release'); b.disabled = false; b.click(); return 0; })()`)
	waitFor(t, ctx, 2*time.Second, `document.getElementById('action-dialog').open`, `'closed'`)
	click(t, ctx, "#action-confirm")
	waitFor(t, ctx, 5*time.Second, text("#action-error")+`.startsWith('Forbidden: ')`, text("#action-result"))
	if got := eval[string](t, ctx, text("#action-error")); !strings.Contains(got, `User "bob" cannot patch resource "leases"`) {
		t.Errorf("the 403 shown: %q", got)
	}
	if got := string(e.request(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/gateway", nil, http.StatusOK)); !strings.Contains(got, `"holderIdentity":"gw-2"`) {
		t.Errorf("bob changed the lease: %s", got)
	}
	// Nor can bob write into the audit trail directly.
	e.token = "bob-token"
	e.request(t, "POST", "/ui/api/v1/namespaces/edge/leases/gateway/actions/release", map[string]any{"holder": "gw-2"}, http.StatusForbidden)
	recs, err := e.hist.Decisions(context.Background(), "edge", "gateway")
	if err != nil || len(recs) != 0 {
		t.Errorf("records after denied actions: %v %+v", err, recs)
	}
}

// TestActionRecordChecksTheLease: the server records only what the lease
// shows done, so a record cannot claim an action that did not happen.
func TestActionRecordChecksTheLease(t *testing.T) {
	t.Parallel()
	e := startAuthEnv(t)
	seedCoordinated(t, e)
	base := "/ui/api/v1/namespaces/edge/leases/gateway/actions/"
	e.request(t, "POST", base+"handover", map[string]any{"holder": "gw-2", "target": "gw-1"}, http.StatusConflict)
	e.request(t, "POST", base+"delete", map[string]any{}, http.StatusConflict) // it still exists
	// gw-9 has held lease edge/old for a minute: not released.
	e.createLease(t, lease{ns: "edge", name: "old", holder: "gw-9", duration: 3600, renewed: time.Minute})
	e.request(t, "POST", "/ui/api/v1/namespaces/edge/leases/old/actions/release", map[string]any{"holder": "gw-9"}, http.StatusConflict)
	// Nor asked to step down: the lease carries no such request.
	e.request(t, "POST", "/ui/api/v1/namespaces/edge/leases/old/actions/stepdown", map[string]any{"holder": "gw-9"}, http.StatusConflict)
	e.request(t, "POST", base+"stepdown", map[string]any{}, http.StatusConflict) // no step-down was written
	e.request(t, "POST", base+"handover", map[string]any{}, http.StatusBadRequest)
	e.request(t, "GET", base+"release", nil, http.StatusMethodNotAllowed)
	if recs, err := e.hist.Decisions(context.Background(), "edge", "gateway"); err != nil || len(recs) != 0 {
		t.Errorf("records of actions not done: %v %+v", err, recs)
	}
}

// TestActionRecordsCannotBeForged: the hostile review had the record
// endpoint write "deleted the lease" for a live lease (any other uid
// given) and "released" naming a holder who never held it. Records are
// now written by the server as it performs the write, from the lease it
// saw; the endpoint only hands back what was recorded.
func TestActionRecordsCannotBeForged(t *testing.T) {
	t.Parallel()
	e := startAuthEnv(t)
	seedCoordinated(t, e)
	base := "/ui/api/v1/namespaces/edge/leases/gateway/actions/"
	e.request(t, "POST", base+"delete", map[string]any{"uid": "not-the-lease-uid"}, http.StatusConflict)
	e.request(t, "POST", base+"release", map[string]any{"holder": "never-held-it"}, http.StatusConflict)
	e.request(t, "POST", base+"handover", map[string]any{"holder": "gw-2", "target": "gw-1"}, http.StatusConflict)
	if recs, err := e.hist.Decisions(context.Background(), "edge", "gateway"); err != nil || len(recs) != 0 {
		t.Fatalf("forged records: %v %+v", err, recs)
	}
	// A release done with kubectl (no page involved) is recorded by the
	// server, with the holder it saw; the page's claim changes nothing.
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/edge/leases/gateway", map[string]any{"spec": map[string]any{"holderIdentity": nil}}, http.StatusOK)
	recs, err := e.hist.Decisions(context.Background(), "edge", "gateway")
	if err != nil || len(recs) != 1 || recs[0].Action != "release" || recs[0].Holder != "gw-2" || recs[0].Reason != "alice force-released the lease through the API" {
		t.Fatalf("records after a release: %v %+v", err, recs)
	}
	got := string(e.request(t, "POST", base+"release", map[string]any{"holder": "never-held-it"}, http.StatusCreated))
	if !strings.Contains(got, `"holder":"gw-2"`) || strings.Contains(got, "never-held-it") {
		t.Fatalf("claimed record: %s", got)
	}
	// Claimed once; and bob, who did nothing, has nothing to claim.
	e.request(t, "POST", base+"release", map[string]any{}, http.StatusConflict)
	if recs, _ := e.hist.Decisions(context.Background(), "edge", "gateway"); len(recs) != 1 {
		t.Fatalf("records: %+v", recs)
	}
}
