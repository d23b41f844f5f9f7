package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/engine/history"
)

// rowState is the expression of a lease row's "holder|state|expires" text.
func rowState(key string) string {
	return `(() => { const r = document.querySelector('tr[data-key="` + key + `"]');
		return r ? [r.querySelector('.c-holder code').innerText, r.querySelector('.badge').innerText, r.querySelector('.exp').innerText].join('|') : 'missing'; })()`
}

const pageState = `document.getElementById('main').innerText.slice(0, 600) + ' | conn: ' + document.getElementById('conn').innerText`

// seed creates one lease in each state, with candidates and a recorded
// election decision for the coordinated one.
func seed(t *testing.T, e *env) {
	t.Helper()
	now := time.Now()
	module := history.DecisionModule{Name: "oldest-emulation-version", Version: "1.0.0", Builtin: true}
	record := func(d history.DecisionRecord) {
		t.Helper()
		if err := e.hist.RecordDecision(context.Background(), "edge", "gateway", d, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The controller records a grant just before it writes the lease.
	record(history.DecisionRecord{Time: now, Trigger: "lease_missing", Strategy: "OldestEmulationVersion", Action: "grant", Chosen: "gw-2",
		Module: module, Ranking: []string{"gw-2"},
		Candidates: []history.DecisionCandidate{{Name: "gw-2", EmulationVersion: "1.37.0", Acked: true, State: "acked"}},
		Reason:     "only candidate", Outcome: "ok"})
	for _, l := range []lease{
		{ns: "kube-system", name: "kube-scheduler", holder: "node-a_6f1c2", duration: 3600, renewed: 2 * time.Second, transitions: 3},
		{ns: "default", name: "billing-worker", holder: "billing-7d9f-x2", duration: 400, renewed: 320 * time.Second, transitions: 1}, // expiring for 80 s: room for a slow browser
		{ns: "default", name: "gone-away", holder: "device-17", duration: 10, renewed: 5 * time.Minute, transitions: 6},
		{ns: "edge", name: "gateway", holder: "gw-2", preferred: "gw-1", strategy: "OldestEmulationVersion", duration: 3600, renewed: time.Second, transitions: 2},
		{ns: "edge", name: "spare", duration: 15},
	} {
		e.createLease(t, l)
	}
	e.createCandidate(t, "edge", "gw-1", "gateway", "1.37.0", "1.36.0", 3*time.Second)
	e.createCandidate(t, "edge", "gw-2", "gateway", "1.37.0", "1.37.0", 4*time.Second)
	module.SHA256 = "9f2b6c0d4e8a1b3c"
	record(history.DecisionRecord{Time: time.Now(), Trigger: "candidate_changed", Strategy: "OldestEmulationVersion", Holder: "gw-2", Action: "prefer", Chosen: "gw-1",
		Module:     module,
		Ranking:    []string{"gw-1", "gw-2"},
		Candidates: []history.DecisionCandidate{{Name: "gw-1", EmulationVersion: "1.36.0", Acked: true, State: "acked"}, {Name: "gw-2", EmulationVersion: "1.37.0", Acked: true, State: "acked"}},
		Reason:     "gw-1 emulates the oldest version (1.36.0 < 1.37.0)", Outcome: "ok"})
}

func TestOverview(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	seed(t, e)
	ctx := newTab(t, 1280, 760)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/")

	waitFor(t, ctx, 5*time.Second, `document.querySelectorAll('#leases tbody tr').length === 5`, pageState)
	// Times are matched loosely: a loaded machine may take many seconds
	// between seeding and this look.
	for key, want := range map[string]string{
		"kube-system/kube-scheduler": `^node-a_6f1c2\|Held\|in 5\dm `,
		"default/billing-worker":     `^billing-7d9f-x2\|Expiring\|in `,
		"default/gone-away":          `^device-17\|Expired\|expired \dm \d\ds ago`,
		"edge/gateway":               `^gw-2\|Handover pending\|in 5\dm `,
		"edge/spare":                 `^—\|Vacant\|no holder`,
	} {
		if got := eval[string](t, ctx, rowState(key)); !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("row %s = %q, want %s", key, got, want)
		}
	}
	// Default order: soonest expiry first, leases without a holder last.
	order := eval[[]string](t, ctx, `[...document.querySelectorAll('#leases tbody tr')].map(r => r.dataset.key)`)
	if strings.Join(order, " ") != "default/gone-away default/billing-worker kube-system/kube-scheduler edge/gateway edge/spare" {
		t.Errorf("order = %v", order)
	}
	waitFor(t, ctx, 3*time.Second, text("#conn")+` === 'Live'`, pageState)
	if got := eval[string](t, ctx, `document.querySelector('tr[data-key="edge/gateway"] .c-candidates').innerText`); got != "2" {
		t.Errorf("gateway candidates = %q, want 2", got)
	}
	// A pending hand-over names its target; other rows say nothing more.
	if got := eval[string](t, ctx, `[...document.querySelectorAll('.pref')].filter(p => !p.hidden).map(p => p.closest('tr').dataset.key + ': ' + p.innerText).join(', ')`); got != "edge/gateway: handing over to gw-1" {
		t.Errorf("hand-over targets shown: %q", got)
	}
	chips := `[...document.querySelectorAll('.chip')].map(c => c.innerText).join(', ')`
	if got := eval[string](t, ctx, chips); got != "Held 1, Expiring 1, Expired 1, Vacant 1, Handover pending 1" {
		t.Errorf("chips without a filter = %q", got)
	}
	screenshot(t, ctx, "overview")
	darkMode(t, ctx, true)
	screenshot(t, ctx, "overview-dark")
	darkMode(t, ctx, false)

	// Filters live in the URL: a reload keeps them.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("q"), "edge")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 2*time.Second, `location.hash === '#/?q=edge' && document.querySelectorAll('#leases tbody tr').length === 2`, `location.hash`)
	// The chips count what the search lets through, out of all.
	waitFor(t, ctx, 2*time.Second, chips+` === 'Held 0 of 1, Expiring 0 of 1, Expired 0 of 1, Vacant 1 of 1, Handover pending 1 of 1'`, chips)
	navigate(t, ctx, e.base+"/ui/#/?state=expired&sort=name&dir=desc")
	waitFor(t, ctx, 5*time.Second, `document.querySelectorAll('#leases tbody tr').length === 1 && `+text("#summary")+` === '1 of 5 leases'`, pageState)
	if got := eval[string](t, ctx, `document.getElementById('state').value + ' ' + document.querySelector('th[aria-sort]').innerText + ' ' + document.querySelector('th[aria-sort]').getAttribute('aria-sort')`); got != "expired Lease descending" {
		t.Errorf("filter controls after reload = %q", got)
	}
	noConsoleErrors(t, errs)
}

func TestLiveUpdate(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := newTab(t, 1280, 600)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/")
	waitFor(t, ctx, 5*time.Second, text("#conn")+` === 'Live'`, pageState)

	// A lease created elsewhere appears without a reload, within a second.
	start := time.Now()
	e.createLease(t, lease{ns: "default", name: "fresh", holder: "pod-1", duration: 30})
	waitFor(t, ctx, time.Second-time.Since(start), rowState("default/fresh")+`.startsWith('pod-1|Held')`, rowState("default/fresh"))
	t.Logf("created lease shown after %v", time.Since(start))

	// A renewal by a new holder, too.
	start = time.Now()
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/fresh",
		map[string]any{"spec": map[string]any{"holderIdentity": "pod-2", "leaseTransitions": 1}}, 200)
	waitFor(t, ctx, time.Second-time.Since(start), rowState("default/fresh")+`.startsWith('pod-2|Held')`, rowState("default/fresh"))
	t.Logf("renewed lease shown after %v", time.Since(start))

	// And a deletion.
	e.request(t, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases/fresh", nil, 200)
	waitFor(t, ctx, time.Second, rowState("default/fresh")+` === 'missing'`, pageState)
	noConsoleErrors(t, errs)
}

func TestRelistOn410(t *testing.T) {
	t.Parallel()
	e := startEnv(t, 2) // two events of history: resuming from older ones gets 410
	e.createLease(t, lease{ns: "default", name: "a", holder: "node-1", duration: 600})
	ctx := newTab(t, 1280, 600)
	navigate(t, ctx, e.base+"/ui/")
	waitFor(t, ctx, 5*time.Second, text("#conn")+` === 'Live' && `+rowState("default/a")+`.startsWith('node-1|')`, pageState)
	// Cut the stream and miss more changes than the history keeps.
	eval[any](t, ctx, `(window.cut = leasehold.store.leases.lists, leasehold.store.leases.ctl.abort(), 0)`)
	for _, n := range []string{"b", "c", "d"} {
		e.createLease(t, lease{ns: "default", name: n, holder: "node-" + n, duration: 600})
	}
	waitFor(t, ctx, 5*time.Second, `leasehold.store.leases.lists > window.cut && `+rowState("default/d")+`.startsWith('node-d|Held') && `+text("#conn")+` === 'Live'`,
		`leasehold.store.leases.lists + ' lists; ' + `+pageState)
}

func TestCountdownReachesExpiry(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := newTab(t, 1280, 600)
	navigate(t, ctx, e.base+"/ui/")
	// The lease is created once the page is live, so a slow browser start
	// cannot eat its lifetime before the first look.
	waitFor(t, ctx, 10*time.Second, text("#conn")+` === 'Live'`, pageState)
	e.createLease(t, lease{ns: "default", name: "short", holder: "node-1", duration: 5})
	waitFor(t, ctx, 4*time.Second, rowState("default/short")+`.startsWith('node-1|')`, pageState)
	first := eval[string](t, ctx, rowState("default/short"))
	if !strings.Contains(first, "|in ") {
		t.Fatalf("before expiry: %q, want a countdown", first)
	}
	// The countdown runs on the page's own clock: nothing on the server
	// changes when the lease expires.
	waitFor(t, ctx, 15*time.Second, rowState("default/short")+`.startsWith('node-1|Expired|')`, rowState("default/short"))
	if got := eval[string](t, ctx, rowState("default/short")); !strings.HasSuffix(got, " ago") {
		t.Errorf("after expiry: %q, want the time since expiry", got)
	}
}

func TestDetail(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	seed(t, e)
	ctx := newTab(t, 1280, 900)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/")
	waitFor(t, ctx, 5*time.Second, `!!document.querySelector('tr[data-key="edge/gateway"] a')`, pageState)
	// Keyboard: the lease name is a link, Enter opens the detail.
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(`tr[data-key="edge/gateway"] a`)), chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 3*time.Second, `location.hash === '#/lease/edge/gateway' && `+text("#decided")+`.includes('gw-1 emulates the oldest version')`, pageState)

	fields := eval[string](t, ctx, text("#fields"))
	for _, want := range []string{"Holder\ngw-2", "Preferred holder\ngw-1", "State\nHandover pending", "Duration\n3600s", "Strategy\nOldestEmulationVersion", "Transitions\n2", "uid\n"} {
		if !strings.Contains(fields, want) {
			t.Errorf("fields lack %q:\n%s", want, fields)
		}
	}
	if got := eval[string](t, ctx, text("#kubectl")); !strings.Contains(got, "kubectl get lease -n edge gateway -o yaml") {
		t.Errorf("kubectl commands: %q", got)
	}
	cands := eval[string](t, ctx, text("#candidates"))
	for _, want := range []string{"gw-1\t1.37.0\t1.36.0", "gw-2 (holder)\t1.37.0\t1.37.0", "fresh\t1", "fresh\t2"} {
		if !strings.Contains(cands, want) {
			t.Errorf("candidates lack %q:\n%s", want, cands)
		}
	}
	decided := eval[string](t, ctx, text("#decided"))
	for _, want := range []string{"prefer → gw-1", "oldest-emulation-version 1.0.0 (built-in)", "gw-1 > gw-2", "candidate_changed"} {
		if !strings.Contains(decided, want) {
			t.Errorf("decision lacks %q:\n%s", want, decided)
		}
	}
	if got := eval[string](t, ctx, text("#timeline")); !strings.Contains(got, "∅ → gw-2\nelected by oldest-emulation-version: only candidate") || strings.Count(got, "→") != 1 {
		t.Errorf("timeline: %q, want the one grant", got)
	}
	if got := eval[int](t, ctx, `document.querySelectorAll('#history tbody tr').length`); got != 2 {
		t.Errorf("decision history rows = %d, want 2", got)
	}
	yaml := eval[string](t, ctx, `document.getElementById('raw').textContent`)
	for _, want := range []string{"apiVersion: coordination.k8s.io/v1\nkind: Lease\n", "  holderIdentity: gw-2\n", "  preferredHolder: gw-1\n", "  renewTime: \"20"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("YAML lacks %q:\n%s", want, yaml)
		}
	}
	if strings.Contains(yaml, "managedFields") {
		t.Errorf("YAML shows managedFields by default:\n%s", yaml)
	}
	screenshot(t, ctx, "detail")

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("tab-json"))); err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Kind string
		Spec struct{ HolderIdentity string }
	}
	raw := eval[string](t, ctx, `document.getElementById('raw').textContent`)
	if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj.Kind != "Lease" || obj.Spec.HolderIdentity != "gw-2" {
		t.Errorf("JSON tab: %v %+v\n%s", err, obj, raw)
	}

	// A lease without election data says so instead of failing.
	navigate(t, ctx, e.base+"/ui/#/lease/kube-system/kube-scheduler")
	waitFor(t, ctx, 3*time.Second, text("#decided")+`.includes('No election decision recorded')`, pageState)
	if got := eval[string](t, ctx, text("#candidates")); !strings.Contains(got, "No LeaseCandidates") {
		t.Errorf("candidates without any: %q", got)
	}
	noConsoleErrors(t, errs)
}

func TestStaleWhenServerStops(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	e.createLease(t, lease{ns: "default", name: "app", holder: "node-1", duration: 600})
	ctx := newTab(t, 1280, 600)
	navigate(t, ctx, e.base+"/ui/")
	waitFor(t, ctx, 5*time.Second, text("#conn")+` === 'Live' && `+rowState("default/app")+`.startsWith('node-1|Held|in ')`, pageState)

	e.stop()
	waitFor(t, ctx, 4*time.Second, text("#conn")+`.startsWith('Disconnected · stale since ')`, text("#conn"))
	if got := eval[string](t, ctx, text("#stale-banner")); !strings.Contains(got, "stale") {
		t.Errorf("stale banner = %q", got)
	}
	// Countdowns stop instead of ticking on data nobody vouches for.
	before := eval[string](t, ctx, rowState("default/app"))
	time.Sleep(1200 * time.Millisecond)
	after := eval[string](t, ctx, rowState("default/app"))
	if before != after || !strings.HasSuffix(after, "(stale)") {
		t.Errorf("stale countdown: %q then %q, want frozen and marked (stale)", before, after)
	}
	screenshot(t, ctx, "stale")
}

func TestSystem(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	seed(t, e)
	ctx := newTab(t, 1280, 900)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/#/system")
	waitFor(t, ctx, 5*time.Second, `!!document.getElementById('modules')`, pageState)
	// The live-data card follows the page's streams as the header does,
	// not the status re-read every 5 s: once the header says Live, so
	// does the card, within a frame or two.
	waitFor(t, ctx, 5*time.Second, text("#conn")+` === 'Live'`, pageState)
	waitFor(t, ctx, 2*time.Second, text("#live")+`.includes('Leases\n5 (live)') && `+text("#live")+`.includes('LeaseCandidates\n2 (live)')`, text("#live"))
	sys := eval[string](t, ctx, text("#system"))
	if eval[bool](t, ctx, `!!document.getElementById('cluster')`) {
		t.Error("a single device's system page shows a cluster section")
	}
	for _, want := range []string{"v1.37.0+leasehold-0.1.0", "4f1c2d9e8b7a", "Mode\nsingle device, bbolt", "Backend\nboltdb", "/var/lib/leasehold/leasehold.db",
		"Readiness: ready", "storage: ok", "shutdown: ok", "oldest-emulation-version", "deadline exceeded"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system view lacks %q:\n%s", want, sys)
		}
	}
	screenshot(t, ctx, "system")
	noConsoleErrors(t, errs)
}

func TestPhone(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	seed(t, e)
	ctx := newTab(t, 390, 844)
	navigate(t, ctx, e.base+"/ui/")
	waitFor(t, ctx, 5*time.Second, `document.querySelectorAll('#leases tbody tr').length === 5`, pageState)
	// Nothing may scroll sideways on a phone.
	if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("page is %dpx wide on a 390px screen", w)
	}
	screenshot(t, ctx, "phone")
}

func TestTokenPrompt(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	ctx := newTab(t, 1280, 600)
	navigate(t, ctx, e.base+"/ui/")
	waitFor(t, ctx, 5*time.Second, text("#conn")+` === 'Live'`, pageState)
	// Auth is not enforced yet: a 401 seen by the page must open the
	// dialog, and the token must go in a header, never in a URL.
	eval[any](t, ctx, `window.dispatchEvent(new Event('leasehold:unauthorized')), 0`)
	waitFor(t, ctx, time.Second, `document.getElementById('token-dialog').open`, `'closed'`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("token-input"), "s3cret"), chromedp.Click(chromedp.ID("token-save"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, time.Second, `sessionStorage.getItem('leasehold.token') === 's3cret' && !document.getElementById('token-dialog').open`, `'still open'`)
	reqs := chromedp.Events(ctx, network.RequestWillBeSent)
	eval[any](t, ctx, `window.leasehold.api('/ui/api/v1/system?probe=1'), 0`)
	for ev, err := range reqs {
		if err != nil {
			t.Fatalf("no request seen: %v", err)
		}
		if !strings.Contains(ev.Request.URL, "probe=1") {
			continue
		}
		if ev.Request.Headers["Authorization"] != "Bearer s3cret" || strings.Contains(ev.Request.URL, "s3cret") {
			t.Errorf("request %s with headers %v: want the token in the Authorization header only", ev.Request.URL, ev.Request.Headers)
		}
		break
	}
}

// TestTransitionsHistory opens a lease's detail after its holders changed:
// the page shows the real previous holders (from what the server saw),
// not "∅" before the current one, and a coordinated hand-over done by a
// release and a grant as one change from the old holder to the new.
func TestTransitionsHistory(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	e.waitHolders(t, "default", "plain", "") // the server watches leases
	e.createLease(t, lease{ns: "default", name: "plain", holder: "runner-1", duration: 30})
	setHolder(t, e, "default", "plain", "runner-2", 1)
	setHolder(t, e, "default", "plain", "runner-3", 2)
	e.waitHolders(t, "default", "plain", "∅>runner-1 runner-1>runner-2 runner-2>runner-3")

	// A coordinated lease: grants before the server watched are known
	// from the decision history only; then fw-b hands over to fw-c.
	old := time.Now().Add(-10 * time.Minute)
	record := func(d history.DecisionRecord) {
		t.Helper()
		d.Strategy, d.Action, d.Outcome = "OldestEmulationVersion", "grant", "ok"
		d.Module = history.DecisionModule{Name: "oldest-emulation-version", Builtin: true}
		if err := e.hist.RecordDecision(context.Background(), "default", "fw", d, 0); err != nil {
			t.Fatal(err)
		}
	}
	record(history.DecisionRecord{Time: old, Trigger: "lease_missing", Chosen: "fw-a", Reason: "only candidate"})
	record(history.DecisionRecord{Time: old.Add(time.Minute), Trigger: "lease_expired", Chosen: "fw-b", Reason: "fw-a expired"})
	e.createLease(t, lease{ns: "default", name: "fw", holder: "fw-b", strategy: "OldestEmulationVersion", duration: 30, transitions: 1})
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/fw",
		map[string]any{"spec": map[string]any{"preferredHolder": "fw-c"}}, 200)
	setHolder(t, e, "default", "fw", "", 1) // fw-b steps down
	record(history.DecisionRecord{Time: time.Now(), Trigger: "no_holder", Chosen: "fw-c", Reason: "fw-c is preferred"})
	setHolder(t, e, "default", "fw", "fw-c", 2)
	e.waitHolders(t, "default", "fw", "∅>fw-b fw-b>∅ ∅>fw-c")

	ctx := newTab(t, 1280, 900)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/#/lease/default/plain")
	timeline := `[...document.querySelectorAll('#timeline li strong')].map(s => s.innerText).join(', ')`
	waitFor(t, ctx, 5*time.Second, timeline+` === 'runner-2 → runner-3, runner-1 → runner-2, ∅ → runner-1'`, timeline)

	navigate(t, ctx, e.base+"/ui/#/lease/default/fw")
	waitFor(t, ctx, 5*time.Second, timeline+` === 'fw-b → fw-c, ∅ → fw-b, fw-a → fw-b, ∅ → fw-a'`, timeline)
	if got := eval[string](t, ctx, `document.querySelector('#timeline li').innerText`); !strings.Contains(got, "fw-b released, then elected by oldest-emulation-version: fw-c is preferred") {
		t.Errorf("the hand-over: %q", got)
	}
	noConsoleErrors(t, errs)
}

// TestLastAppliedCollapsed: kubectl apply's copy of the whole object is
// folded away under Annotations, with its size, and opens on demand.
func TestLastAppliedCollapsed(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	applied := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"annotations":{"team":"edge"},"name":"applied","namespace":"default"},"spec":{"holderIdentity":"node-1","leaseDurationSeconds":60}}` + "\n"
	e.request(t, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "applied", "namespace": "default", "annotations": map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": applied, "team": "edge"}},
		"spec": map[string]any{"holderIdentity": "node-1", "leaseDurationSeconds": 60},
	}, 201)
	ctx := newTab(t, 1280, 900)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/#/lease/default/applied")
	ann := `document.querySelector('dd[data-f="Annotations"]')`
	want := fmt.Sprintf("kubectl.kubernetes.io/last-applied-configuration (%d bytes)\nteam=edge", len(applied))
	waitFor(t, ctx, 5*time.Second, ann+`?.innerText === `+strconv.Quote(want), ann+`?.innerText`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`dd[data-f="Annotations"] summary`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 2*time.Second, ann+`.querySelector('details').open && `+ann+`.querySelector('pre').innerText.includes('"holderIdentity":"node-1"')`, ann+`.innerText`)
	// It stays open when the lease changes and the page renders it again.
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/applied",
		map[string]any{"metadata": map[string]any{"annotations": map[string]any{"team": "edge-2"}}}, 200)
	waitFor(t, ctx, 5*time.Second, ann+`.innerText.includes('team=edge-2')`, ann+`.innerText`)
	if got := eval[bool](t, ctx, ann+`.querySelector('details').open`); !got {
		t.Error("the annotation closed again by itself")
	}
	noConsoleErrors(t, errs)
}

// TestLeaseEvents: the lease page lists the lease's Events as kubectl
// describe does (type, reason, last seen, from, count, message), and not
// those of another lease.
func TestLeaseEvents(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	e.request(t, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", map[string]any{
		"metadata": map[string]any{"name": "ev"}, "spec": map[string]any{"holderIdentity": "node-1", "leaseDurationSeconds": 60},
	}, 201)
	event := func(name, lease, reason, msg string) map[string]any {
		return map[string]any{
			"metadata":       map[string]any{"name": name},
			"involvedObject": map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "namespace": "default", "name": lease},
			"reason":         reason, "message": msg, "type": "Normal", "count": 2,
			"source":         map[string]any{"component": "kcm"},
			"firstTimestamp": "2026-11-25T10:00:00Z", "lastTimestamp": "2026-11-25T10:00:05Z",
		}
	}
	e.request(t, "POST", "/api/v1/namespaces/default/events", event("ev.1", "ev", "LeaderElection", "node-1 became leader"), 201)
	e.request(t, "POST", "/api/v1/namespaces/default/events", event("other.1", "other", "LeaderElection", "someone else"), 201)
	ctx := newTab(t, 1280, 900)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/#/lease/default/ev")
	rows := `Array.from(document.querySelectorAll('#events tbody tr')).map((r) => Array.from(r.cells).map((c) => c.innerText).join('|')).join('\n')`
	waitFor(t, ctx, 5*time.Second, rows+`.startsWith('Normal|LeaderElection|')`, rows)
	got := eval[string](t, ctx, rows)
	if !strings.HasSuffix(got, "|kcm|2|node-1 became leader") || strings.Contains(got, "someone else") {
		t.Errorf("events table:\n%s", got)
	}
	noConsoleErrors(t, errs)
}
