package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// uiRequest sends one request to the real server and returns its code
// and body.
func uiRequest(t *testing.T, method, url, contentType string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	// The redirect of / is the answer under test: do not follow it.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusFound {
		out = []byte(resp.Header.Get("Location"))
	}
	return resp.StatusCode, out
}

// consoleTimeline is what this test reads of the decisions endpoint.
type consoleTimeline struct {
	Items []struct {
		Trigger, Action, Reason string
	} `json:"items"`
	Timeline *struct {
		Persisted bool `json:"persisted"`
		Tenures   []struct {
			Holder, Ended string
			Renewals      int
		} `json:"tenures"`
	} `json:"timeline"`
}

func (c consoleTimeline) tenures() string {
	if c.Timeline == nil {
		return "<not watching>"
	}
	var out []string
	for _, tn := range c.Timeline.Tenures {
		out = append(out, tn.Holder+":"+tn.Ended)
	}
	return strings.Join(out, " ")
}

// waitConsoleTimeline polls the decisions endpoint of default/app until
// its tenures read want ("holder:ended", ended empty while current).
func waitConsoleTimeline(t *testing.T, base, want string) consoleTimeline {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var c consoleTimeline
		code, body := uiRequest(t, "GET", base+"/ui/api/v1/namespaces/default/leases/app/decisions", "", nil)
		if code == http.StatusOK && json.Unmarshal(body, &c) == nil && c.tenures() == want {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeline of default/app: %d %s, want tenures %q", code, body, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2EUIConsole runs what the UI's console does against the real
// binary: / redirects every client to the UI; the kubectl lines the page
// offers for its actions work; an action's record names the user; and a
// lease's timeline survives a restart of the server.
func TestE2EUIConsole(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	if code, loc := uiRequest(t, "GET", ts.URL+"/", "", nil); code != http.StatusFound || string(loc) != "/ui/" {
		t.Errorf("GET / as an API client: %d %q, want a redirect to /ui/", code, loc)
	}
	leases := ts.URL + "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	now := func() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }
	if code, body := uiRequest(t, "POST", leases, "application/json", map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": map[string]any{"name": "app", "namespace": "default"},
		"spec": map[string]any{"holderIdentity": "node-a", "leaseDurationSeconds": 3600, "acquireTime": now(), "renewTime": now()},
	}); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, holder := range []string{"node-a", "node-b", "node-b"} {
		if code, body := uiRequest(t, "PATCH", leases+"/app", "application/merge-patch+json",
			map[string]any{"spec": map[string]any{"holderIdentity": holder, "renewTime": now()}}); code != http.StatusOK {
			t.Fatalf("renew as %s: %d %s", holder, code, body)
		}
	}
	// The page's "copy as kubectl" line for a release, run by kubectl.
	k := newKubectl(t, ts)
	k.ok("patch", "lease", "-n", "default", "app", "--type=merge", "-p", `{"spec":{"holderIdentity":null}}`)
	code, body := uiRequest(t, "POST", ts.URL+"/ui/api/v1/namespaces/default/leases/app/actions/release", "application/json", map[string]any{"holder": "node-b"})
	if code != http.StatusCreated || !strings.Contains(string(body), `"reason":"system:anonymous@127.0.0.1 force-released the lease through the API"`) {
		t.Errorf("recording the release: %d %s", code, body)
	}
	c := waitConsoleTimeline(t, ts.URL, "node-a:changed node-b:released")
	if c.Timeline.Tenures[0].Renewals != 1 || c.Timeline.Tenures[1].Renewals != 1 || !c.Timeline.Persisted {
		t.Errorf("renewals counted: %+v", c.Timeline)
	}

	// A restart keeps the timeline and the record.
	ts.Stop(t)
	ts2 := startServerIn(t, ts.DataDir)
	c = waitConsoleTimeline(t, ts2.URL, "node-a:changed node-b:released")
	if n := len(c.Items); n != 1 || c.Items[0].Trigger != "operator" || c.Items[0].Action != "release" {
		t.Errorf("decision history after the restart: %+v", c.Items)
	}
	// The page's line for a delete; the timeline goes with the lease.
	newKubectl(t, ts2).ok("delete", "lease", "-n", "default", "app")
	waitConsoleTimeline(t, ts2.URL, "")
}
