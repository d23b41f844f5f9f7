package ui_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web/ui"
)

// holders reads a lease's holder history through the decisions endpoint.
func (e *env) holders(t *testing.T, ns, name string) *ui.HolderHistory {
	t.Helper()
	var d ui.Decisions
	body := e.request(t, "GET", "/ui/api/v1/namespaces/"+ns+"/leases/"+name+"/decisions", nil, 200)
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("decisions body %s: %v", body, err)
	}
	return d.Holders
}

// waitHolders polls until the holder history of ns/name reads want
// ("from>to" pairs, ∅ for none).
func (e *env) waitHolders(t *testing.T, ns, name, want string) *ui.HolderHistory {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := e.holders(t, ns, name)
		got := "<not watching>"
		if h != nil {
			var pairs []string
			for _, c := range h.Items {
				pairs = append(pairs, or(c.From, "∅")+">"+or(c.To, "∅"))
			}
			got = strings.Join(pairs, " ")
		}
		if got == want {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("holder history of %s/%s = %q, want %q", ns, name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func setHolder(t *testing.T, e *env, ns, name, holder string, transitions int) {
	t.Helper()
	var h any = holder
	if holder == "" {
		h = nil
	}
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/"+name,
		map[string]any{"spec": map[string]any{"holderIdentity": h, "leaseTransitions": transitions}}, 200)
}

// TestHolderHistory: the server remembers who held a plain lease before,
// including a release, so the page shows the real previous holder even
// when it opens after the changes.
func TestHolderHistory(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	// The history is there once the server has listed the leases.
	e.waitHolders(t, "default", "app", "")

	e.createLease(t, lease{ns: "default", name: "app", holder: "runner-1", duration: 10})
	setHolder(t, e, "default", "app", "runner-2", 1)
	setHolder(t, e, "default", "app", "", 1)
	setHolder(t, e, "default", "app", "runner-3", 2)
	// Renewals by the same holder are not changes.
	e.request(t, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/app",
		map[string]any{"spec": map[string]any{"renewTime": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")}}, 200)
	h := e.waitHolders(t, "default", "app", "∅>runner-1 runner-1>runner-2 runner-2>∅ ∅>runner-3")
	if last := h.Items[len(h.Items)-1]; last.Transitions != 2 || time.Since(last.Time) > time.Minute || h.Since.After(h.Items[0].Time) {
		t.Errorf("history %+v: want the last change with 2 transitions, seen just now, after Since", h)
	}

	// The history is bounded per lease: the oldest changes go.
	var want []string
	prev := "runner-3"
	for i := range 12 {
		next := fmt.Sprintf("runner-%d", 10+i)
		setHolder(t, e, "default", "app", next, 3+i)
		want = append(want, prev+">"+next)
		prev = next
	}
	e.waitHolders(t, "default", "app", strings.Join(want[len(want)-10:], " "))

	// A deleted lease takes its history with it.
	e.request(t, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases/app", nil, 200)
	e.createLease(t, lease{ns: "default", name: "app", duration: 10})
	e.waitHolders(t, "default", "app", "")
}
