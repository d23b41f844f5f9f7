package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web/client/lease"
)

// member answers DELETE of a member with the 503 + Retry-After Status of
// "no leader yet" waits times, then with final (code and body).
func member(t *testing.T, waits int32, code int, body string) (*lease.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= waits {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":503,"reason":"ServiceUnavailable",` +
				`"message":"cluster: cannot remove m1 yet (try again shortly): no raft leader yet","details":{"retryAfterSeconds":1}}`))
			return
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := lease.New(lease.Config{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

// TestRemoveWaiting: a 503 with Retry-After is waited out, saying so; a
// 503 without it (no quorum) ends at once; a member gone after a wait was
// removed by the attempt the member had answered; the bound ends the wait
// with the last reason.
func TestRemoveWaiting(t *testing.T) {
	ctx := context.Background()
	notFound := `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound","message":"members \"m1\" not found"}`
	noQuorum := `{"kind":"Status","apiVersion":"v1","status":"Failure","code":503,"reason":"ServiceUnavailable","message":"the cluster has no quorum: 1 of 3"}`

	c, calls := member(t, 2, http.StatusOK, `{"removed":"m1"}`)
	var progress strings.Builder
	if err := RemoveWaiting(ctx, c, "m1", &progress); err != nil {
		t.Fatalf("after two waits: %v", err)
	}
	if calls.Load() != 3 || !strings.Contains(progress.String(), "waiting (") || !strings.Contains(progress.String(), "no raft leader yet") {
		t.Errorf("%d calls, progress %q; want 3 calls and the reason waited for", calls.Load(), progress.String())
	}

	c, calls = member(t, 0, http.StatusServiceUnavailable, noQuorum)
	if err := RemoveWaiting(ctx, c, "m1", new(strings.Builder)); err == nil || !strings.Contains(err.Error(), "no quorum") || calls.Load() != 1 {
		t.Errorf("no quorum: %v after %d calls; want the error at once", err, calls.Load())
	}

	c, _ = member(t, 1, http.StatusNotFound, notFound)
	if err := RemoveWaiting(ctx, c, "m1", new(strings.Builder)); err != nil {
		t.Errorf("gone after a wait: %v, want removed", err)
	}
	c, _ = member(t, 0, http.StatusNotFound, notFound)
	if err := RemoveWaiting(ctx, c, "m1", new(strings.Builder)); !lease.IsNotFound(err) {
		t.Errorf("unknown member: %v, want 404", err)
	}

	c, _ = member(t, 1000, http.StatusOK, "")
	bctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if err := RemoveWaiting(bctx, c, "m1", new(strings.Builder)); err == nil || !strings.Contains(err.Error(), "no raft leader yet") ||
		!strings.Contains(err.Error(), "gave up after") {
		t.Errorf("past the bound: %v, want the last reason and that it gave up", err)
	}
}
