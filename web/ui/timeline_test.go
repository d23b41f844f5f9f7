package ui_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/engine/history"
	"github.com/leasehold/leasehold/web/ui"
)

// timelineOf reads a lease's timeline through the decisions endpoint.
func (e *env) timelineOf(t *testing.T, ns, name string) *ui.TimelineView {
	t.Helper()
	var d ui.Decisions
	body := e.request(t, "GET", "/ui/api/v1/namespaces/"+ns+"/leases/"+name+"/decisions", nil, 200)
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("decisions body %s: %v", body, err)
	}
	return d.Timeline
}

// tenures renders a timeline as "holder[?]" (? unconfirmed) "!" (expired).
func tenures(v *ui.TimelineView) string {
	if v == nil {
		return "<not watching>"
	}
	var out []string
	for _, tn := range v.Tenures {
		s := tn.Holder
		if tn.Unconfirmed {
			s += "?"
		}
		if !tn.ExpiredAt.IsZero() {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// waitTimeline polls until the timeline of ns/name reads want.
func (e *env) waitTimeline(t *testing.T, ns, name, want string) *ui.TimelineView {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v := e.timelineOf(t, ns, name)
		if got := tenures(v); got == want {
			return v
		} else if time.Now().After(deadline) {
			t.Fatalf("timeline of %s/%s: %q, want %q", ns, name, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func micro(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// renew writes a renewal (the same holder) or an acquisition (another).
func renew(t *testing.T, e *env, ns, name, holder string, acquire bool) {
	t.Helper()
	now := micro(time.Now())
	spec := map[string]any{"holderIdentity": holder, "renewTime": now}
	if acquire {
		spec["acquireTime"] = now
	}
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/"+name, map[string]any{"spec": spec}, 200)
}

// TestTimelineStrip: a lease's holders over time, with renewals counted,
// an expiry and its gap, and a grant redirected at once shown as a mark,
// not a tenure; drawn on the detail page, counted in the overview's
// sparkline, and still there after a restart.
func TestTimelineStrip(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	e.waitHolders(t, "default", "app", "") // the server watches leases
	e.createLease(t, lease{ns: "default", name: "app", holder: "node-a", duration: 1})
	for range 3 {
		renew(t, e, "default", "app", "node-a", false)
	}
	// node-a stops renewing: its 1 s lease expires, and a gap opens.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v := e.timelineOf(t, "default", "app")
		if tenures(v) == "node-a!" && len(v.Gaps) == 1 && v.Gaps[0].Seconds >= 1.5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no gap after the expiry: %+v", v)
		}
	}
	renew(t, e, "default", "app", "node-b", true)
	renew(t, e, "default", "app", "node-b", false)
	// A grant to node-c redirected to node-d before node-c renewed.
	renew(t, e, "default", "app", "node-c", true)
	renew(t, e, "default", "app", "node-d", true)
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/app",
		map[string]any{"spec": map[string]any{"leaseDurationSeconds": 3600}}, 200)
	renew(t, e, "default", "app", "node-d", false)
	v := e.waitTimeline(t, "default", "app", "node-a! node-b node-c? node-d")
	if v.Tenures[0].Renewals != 3 || len(v.Gaps) != 1 || v.Gaps[0].After != "node-a" || v.Gaps[0].Cause != "expired" || v.Gaps[0].Seconds < 1.5 {
		t.Errorf("renewals and gaps: %+v %+v", v.Tenures[0], v.Gaps)
	}

	ctx := newTab(t, 1280, 1000)
	errs := consoleErrors(ctx)
	navigate(t, ctx, e.base+"/ui/")
	spark := `document.querySelector('tr[data-key="default/app"] .spark')`
	waitFor(t, ctx, 5*time.Second, spark+`?.querySelectorAll('rect.on').length === 1`, spark+`?.outerHTML`)
	// node-b, then node-d: node-c never held it.
	if got := eval[string](t, ctx, spark+`.title`); !strings.HasPrefix(got, "2 changes of hands in the last 24h") {
		t.Errorf("sparkline title %q", got)
	}
	navigate(t, ctx, e.base+"/ui/#/lease/default/app")
	segs := `[...document.querySelectorAll('#strip rect.seg')].map(r => r.dataset.holder).join(' ')`
	waitFor(t, ctx, 5*time.Second, segs+` === 'node-a node-b node-d'`, segs)
	for sel, want := range map[string]int{"#strip rect.gap": 1, "#strip rect.unconf": 1, "#strip rect.exp": 1} {
		if got := eval[int](t, ctx, `document.querySelectorAll('`+sel+`').length`); got != want {
			t.Errorf("%s: %d, want %d", sel, got, want)
		}
	}
	list := eval[string](t, ctx, text("#tenure-list"))
	for _, want := range []string{"node-c\t", "granted, redirected before it renewed: not a tenure", "gap\t", "after node-a expired", "node-a\t", "\t3\texpired"} {
		if !strings.Contains(list, want) {
			t.Errorf("tenure list lacks %q:\n%s", want, list)
		}
	}
	click(t, ctx, `button[data-range="day"]`)
	waitFor(t, ctx, 2*time.Second, `document.querySelector('#strip svg').getAttribute('aria-label') === 'Holders over the last day'`, `document.querySelector('#strip svg').getAttribute('aria-label')`)
	noConsoleErrors(t, errs)

	// Restart on the same database: the timeline is still there.
	deadline := time.Now().Add(10 * time.Second)
	for {
		docs, err := e.hist.Timelines(context.Background())
		var tl struct{ Tenures []ui.Tenure }
		for nn, doc := range docs {
			if nn.Name == "app" {
				json.Unmarshal(doc, &tl)
			}
		}
		if err == nil && len(tl.Tenures) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timeline was not stored: %v %+v", err, tl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And an hour of edge/gateway, as a server that ran then stored it.
	e.createLease(t, lease{ns: "edge", name: "gateway", holder: "gw-2", duration: 15, renewed: time.Second})
	e.stop()
	e.closeStore()
	now := time.Now()
	at := func(d time.Duration) time.Time { return now.Add(-d) }
	hour := ui.TimelineDoc{Since: at(65 * time.Minute), Tenures: []ui.Tenure{
		{Holder: "gw-1", Start: at(60 * time.Minute), LastRenew: at(42 * time.Minute), Renewals: 540, DurationSeconds: 15, End: at(41 * time.Minute), Ended: "changed"},
		{Holder: "gw-2", Start: at(41 * time.Minute), LastRenew: at(20 * time.Minute), Renewals: 630, DurationSeconds: 15, End: at(20 * time.Minute), Ended: "changed"},
		{Holder: "gw-3", Start: at(20 * time.Minute), LastRenew: at(20 * time.Minute), DurationSeconds: 15, End: at(20*time.Minute - 120*time.Millisecond), Ended: "changed", Unconfirmed: true},
		{Holder: "gw-1", Start: at(20*time.Minute - 120*time.Millisecond), LastRenew: at(5 * time.Minute), Renewals: 450, DurationSeconds: 15, End: at(5 * time.Minute), Ended: "released"},
		// Its start leaves 30 s for the checks of the 5-minute range
		// below (8 s, on a loaded machine, was not enough).
		{Holder: "gw-2", Start: at(5*time.Minute - 30*time.Second), LastRenew: at(time.Second), Renewals: 146, DurationSeconds: 15},
	}}
	doc, err := json.Marshal(hour)
	if err != nil {
		t.Fatal(err)
	}
	e2 := startEnvWith(t, envOptions{dbPath: e.dbPath, beforeServe: func(hist *history.Store) {
		if err := hist.SaveTimeline(context.Background(), "edge", "gateway", doc); err != nil {
			t.Fatal(err)
		}
	}})
	v2 := e2.waitTimeline(t, "default", "app", "node-a! node-b node-c? node-d")
	if !v2.Persisted || len(v2.Gaps) != 1 {
		t.Errorf("after the restart: persisted %v, gaps %+v", v2.Persisted, v2.Gaps)
	}
	gw := e2.waitTimeline(t, "edge", "gateway", "gw-1! gw-2 gw-3? gw-1 gw-2")
	if len(gw.Gaps) != 2 || gw.Gaps[0].Cause != "expired" || gw.Gaps[1].Cause != "released" || gw.Gaps[1].Seconds < 29.9 {
		t.Errorf("gateway's gaps: %+v", gw.Gaps)
	}
	ctx = newTab(t, 1280, 1000)
	errs = consoleErrors(ctx)
	navigate(t, ctx, e2.base+"/ui/")
	spark = `document.querySelector('tr[data-key="edge/gateway"] .spark')`
	waitFor(t, ctx, 5*time.Second, spark+`?.title.startsWith('3 changes of hands')`, spark+`?.title`)
	navigate(t, ctx, e2.base+"/ui/#/lease/edge/gateway")
	waitFor(t, ctx, 5*time.Second, segs+` === 'gw-1 gw-2 gw-1 gw-2'`, segs)
	if got := eval[int](t, ctx, `document.querySelectorAll('#strip rect.gap').length`); got != 2 {
		t.Errorf("gateway's gaps drawn: %d, want 2", got)
	}
	// The short ranges zoom in: the last 15 minutes show gw-1's end and
	// gw-2 after the release's gap, the last 5 only gw-2.
	label := `document.querySelector('#strip svg').getAttribute('aria-label')`
	click(t, ctx, `button[data-range="15m"]`)
	waitFor(t, ctx, 2*time.Second, label+` === 'Holders over the last 15 minutes' && `+segs+` === 'gw-1 gw-2' && document.querySelectorAll('#strip rect.gap').length === 1`,
		label+` + ': ' + `+segs)
	click(t, ctx, `button[data-range="5m"]`)
	waitFor(t, ctx, 2*time.Second, label+` === 'Holders over the last 5 minutes' && `+segs+` === 'gw-2'`, label+` + ': ' + `+segs)
	if got := eval[string](t, ctx, text("#strip-note")); !strings.HasPrefix(got, "1 tenure began in the last 5 minutes.") {
		t.Errorf("5-minute note: %q", got)
	}
	click(t, ctx, `button[data-range="hour"]`)
	screenshot(t, ctx, "timeline")
	noConsoleErrors(t, errs)
	// A deleted lease's timeline is deleted with it.
	e2.request(t, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases/app", nil, 200)
	deadline = time.Now().Add(10 * time.Second)
	for {
		docs, err := e2.hist.Timelines(context.Background())
		if _, left := docs[types.NamespacedName{Namespace: "default", Name: "app"}]; err == nil && !left && len(docs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timelines left after the delete: %v %d", err, len(docs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
