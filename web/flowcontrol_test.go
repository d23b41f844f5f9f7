package web_test

import (
	"encoding/json"
	"fmt"

	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web"
	"github.com/leasehold/leasehold/web/flowcontrol"
)

const leasesURL = "/apis/coordination.k8s.io/v1/namespaces/%s/leases"

func createLeases(t *testing.T, base, ns string, n int) {
	t.Helper()
	for i := range n {
		body := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l%04d"},"spec":{"holderIdentity":"h","leaseDurationSeconds":15}}`, i)
		if r := do(t, "POST", base+fmt.Sprintf(leasesURL, ns), body, "Content-Type: application/json"); r.code != 201 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
}

// TestFlowControlOverHTTP fills the workload class with a request whose
// body never comes, then checks over real HTTP: a second request of the
// same client queues, a third is answered 429 with Retry-After and a
// TooManyRequests Status, a renewal (leader-election class) is served
// meanwhile, /metrics counts the rejection, and the queued request is
// served once the seats are free.
func TestFlowControlOverHTTP(t *testing.T) {
	base := startServer(t, func(o *web.Options) {
		o.Limits.MaxRequestsInflight = 6 // workload: 2 seats
		o.Limits.FlowControl = flowcontrol.Config{QueueLengths: [6]int{1, 1, 1, 1, 1, 1}, QueueWait: time.Minute}
	})
	createLeases(t, base, "default", 1)
	lease := base + fmt.Sprintf(leasesURL, "default") + "/l0000"

	// A large patch (workload, two seats) whose body is never sent holds
	// the class while the server waits for the body.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	// fasthttp pre-reads a few kilobytes of a streamed body before the
	// handler runs: send more than that, then stall.
	fmt.Fprintf(conn, "PATCH %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/merge-patch+json\r\nContent-Length: %d\r\n\r\n{%q:%q",
		strings.TrimPrefix(lease, base), 2*flowcontrol.SmallBodyBytes, "metadata", strings.Repeat("x", 16<<10))
	metrics := func() string { return do(t, "GET", base+"/metrics", "").body }
	waitFor := func(series string) {
		t.Helper()
		for m := metrics(); !strings.Contains(m, series+"\n"); m = metrics() {
			if d, ok := t.Deadline(); ok && time.Until(d) < 10*time.Second {
				t.Fatalf("metrics never showed %s:\n%s", series, grep(m, "apiserver_flowcontrol_current"))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(`apiserver_flowcontrol_current_executing_seats{priority_level="workload"} 2`)

	queued := make(chan response, 1)
	go func() { queued <- do(t, "GET", base+"/apis", "") }() // discovery: workload
	waitFor(`apiserver_flowcontrol_current_inqueue_requests{priority_level="workload"} 1`)

	r := do(t, "GET", base+"/api", "")
	if r.code != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("third workload request: %d Retry-After=%q; want 429 with Retry-After 1", r.code, r.header.Get("Retry-After"))
	}
	var st struct {
		Kind, Status, Reason, Message string
		Code                          int
		Details                       struct{ RetryAfterSeconds int }
	}
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || st.Kind != "Status" || st.Reason != "TooManyRequests" || st.Code != 429 || st.Details.RetryAfterSeconds != 1 {
		t.Fatalf("429 body %s (%v); want a TooManyRequests Status", r.body, err)
	}

	// The leader-election class is untouched by the full workload class.
	got := do(t, "GET", lease, "")
	if got.code != 200 {
		t.Fatalf("renewal GET while workload is full: %d %s", got.code, got.body)
	}
	if put := do(t, "PUT", lease, got.body, "Content-Type: application/json"); put.code != 200 {
		t.Fatalf("renewal PUT while workload is full: %d %s", put.code, put.body)
	}
	if m := metrics(); !strings.Contains(m, `apiserver_flowcontrol_rejected_requests_total{priority_level="workload",reason="queue-full"} 1`+"\n") {
		t.Errorf("metrics do not count the rejection:\n%s", grep(m, "apiserver_flowcontrol_rejected"))
	}

	conn.Close() // the patch ends; its seats go to the queued request
	if r := <-queued; r.code != 200 {
		t.Fatalf("queued request: %d %s", r.code, r.body)
	}
}

// TestConcurrentListsWithinByteBudget runs LISTs from many clients at
// once with a byte budget smaller than their responses together: every
// one is answered whole, and the budget is free again afterwards.
func TestConcurrentListsWithinByteBudget(t *testing.T) {
	base := startServer(t, func(o *web.Options) {
		o.Limits.FlowControl = flowcontrol.Config{ListBytes: 64 << 10, QueueWait: time.Minute}
	})
	createLeases(t, base, "big", 300)
	url := base + fmt.Sprintf(leasesURL, "big")
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for range 24 {
		wg.Go(func() {
			r := do(t, "GET", url, "")
			var l struct{ Items []json.RawMessage }
			if err := json.Unmarshal([]byte(r.body), &l); r.code != 200 || err != nil || len(l.Items) != 300 {
				errs <- fmt.Errorf("LIST: %d, %d items, %v", r.code, len(l.Items), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The budget is given back once a response's last byte is written,
	// which a client may read a moment before the server's handler ends.
	var m string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m = do(t, "GET", base+"/metrics", "").body
		if strings.Contains(m, "leasehold_flowcontrol_list_bytes_inflight 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("LIST budget not given back within 10s of the last response:\n%s", grep(m, "leasehold_flowcontrol_list_bytes"))
			break
		}
	}
	if strings.Contains(m, `apiserver_flowcontrol_rejected_requests_total{priority_level="list",reason="time-out"} 0`) == false {
		t.Errorf("LISTs were rejected:\n%s", grep(m, "apiserver_flowcontrol_rejected"))
	}
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
