package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/leasehold/leasehold/internal/testneeds"
)

// TestE2ERunUIActions drives the web UI in Chromium against three real
// "leasehold run" processes: "Ask the holder to step down" hands the lease
// over through the holder (its child stops, another starts at once), and
// "Force release" says what it costs and keeps that promise (the next
// child starts only once the old holder's lease would have run out, and
// never beside the old one).
func TestE2ERunUIActions(t *testing.T) {
	chromium := testneeds.Chromium(t)
	dir := t.TempDir()
	e := newRunEnv(t, dir)
	ts := startServer(t)
	file := filepath.Join(dir, "records")
	const lease = "ui-actions"
	procs := map[string]*runProc{}
	for _, id := range []string{"u1", "u2", "u3"} {
		procs[id] = e.start(t, id, file, []string{"--server", ts.URL, "--lease", lease})
	}
	waitRecord(t, file, 10*time.Second, "first start", func(r record) bool { return r.kind == "start" })

	ctx, closeBrowser := openBrowser(t, chromium, 90*time.Second)
	defer closeBrowser()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(ts.URL+"/ui/#/lease/default/"+lease)); err != nil {
		t.Fatalf("open the lease page: %v", err)
	}
	js := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return s
	}
	// act opens an action's dialog once the page offers it for a holder
	// (the step-down's kubectl line names it), and returns that holder,
	// the dialog's text and when it confirmed, once the page says done.
	// The holder is read from the page, not assumed: on a loaded machine
	// a runner can miss its renewals and another take the lease over
	// between two steps of the test.
	act := func(action string) (holder, text string, at time.Time) {
		t.Helper()
		eventually(t, 20*time.Second, action+" enabled", func() (bool, string) {
			s := js(`(() => { const b = document.getElementById('act-` + action + `'); const c = document.querySelector('li[data-action="stepdown"] code');
				const m = c && c.textContent.match(/step-down=([^' ]+)/);
				return b && !b.disabled && m ? 'holder:' + m[1] : (document.getElementById('actions') || {}).innerText || 'no actions'; })()`)
			holder, _ = strings.CutPrefix(s, "holder:")
			return strings.HasPrefix(s, "holder:"), s
		})
		js(`document.getElementById('act-` + action + `').click(), ''`)
		eventually(t, 5*time.Second, action+" dialog", func() (bool, string) {
			text = js(`document.getElementById('action-dialog').open ? document.getElementById('action-text').innerText : ''`)
			return text != "", "closed"
		})
		at = time.Now()
		js(`document.getElementById('action-confirm').click(), ''`)
		eventually(t, 10*time.Second, action+" done", func() (bool, string) {
			s := js(`(document.getElementById('action-result') || {}).innerText || ''`)
			return strings.Contains(s, "Recorded in the decision history"), s
		})
		js(`document.getElementById('action-cancel').click(), ''`)
		return holder, text, at
	}

	// Graceful: the holder steps down and another runner starts at once.
	time.Sleep(2 * runRetry)
	holder, text, askedAt := act("stepdown")
	if !strings.Contains(text, "releases the lease itself") {
		t.Errorf("the step-down dialog: %q", text)
	}
	second := waitRecord(t, file, runLease, "start after the step-down", func(r record) bool { return r.kind == "start" && r.at.After(askedAt) })
	if second.id == holder {
		t.Errorf("%s took the lease back after stepping down", holder)
	}
	t.Logf("UI step-down: the next child started %v after the confirmation", second.at.Sub(askedAt).Round(time.Millisecond))

	// Forced: the dialog names the cost, and the next child waits it out.
	time.Sleep(2 * runRetry)
	var forcedAt time.Time
	holder, text, forcedAt = act("release")
	if !strings.Contains(text, "would have expired") || !strings.Contains(text, "3 s") {
		t.Errorf("the force release dialog does not say what it costs: %q", text)
	}
	third := waitRecord(t, file, 3*runLease, "start after the forced release", func(r record) bool { return r.kind == "start" && r.at.After(forcedAt) })
	t.Logf("UI force release: %s's child wrote its last record %v and the next child started %v after the confirmation",
		holder, lastRecord(t, file, holder, third.at).Sub(forcedAt).Round(time.Millisecond), third.at.Sub(forcedAt).Round(time.Millisecond))
	if d := third.at.Sub(forcedAt); d < runLease-2*runRetry {
		t.Errorf("a child started %v after a forced release: before the old holder's lease could run out", d)
	}
	for _, p := range procs {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		p.wait(t, 10*time.Second)
	}
	checkAtMostOne(t, file)
}
