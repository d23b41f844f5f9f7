package flowcontrol

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Request
		want Class
	}{
		{"renewal GET", Request{IsResourceRequest: true, Verb: "get", Resource: "leases", Path: "/apis/coordination.k8s.io/v1/namespaces/a/leases/l"}, LeaderElection},
		{"renewal PUT", Request{IsResourceRequest: true, Verb: "update", Resource: "leases", BodyBytes: 900}, LeaderElection},
		{"candidate create", Request{IsResourceRequest: true, Verb: "create", Resource: "leasecandidates", BodyBytes: 700}, LeaderElection},
		{"lease delete", Request{IsResourceRequest: true, Verb: "delete", Resource: "leases"}, LeaderElection},
		{"large lease patch", Request{IsResourceRequest: true, Verb: "patch", Resource: "leases", BodyBytes: 200 << 10}, Workload},
		{"chunked lease patch", Request{IsResourceRequest: true, Verb: "patch", Resource: "leases", BodyBytes: -1}, Workload},
		{"lease list", Request{IsResourceRequest: true, Verb: "list", Resource: "leases"}, List},
		{"lease watch", Request{IsResourceRequest: true, Verb: "watch", Resource: "leases"}, List},
		{"deletecollection", Request{IsResourceRequest: true, Verb: "deletecollection", Resource: "leases"}, List},
		{"event create", Request{IsResourceRequest: true, Verb: "create", Resource: "events", BodyBytes: 500}, Workload},
		{"lease status subresource", Request{IsResourceRequest: true, Verb: "get", Resource: "leases", Subresource: "decisions"}, Workload},
		{"discovery", Request{Verb: "get", Path: "/apis"}, Workload},
		{"ui page", Request{Verb: "get", Path: "/ui/leases"}, UI},
		{"ui root", Request{Verb: "get", Path: "/"}, UI},
		{"metrics", Request{Verb: "get", Path: "/metrics"}, Metrics},
		{"backup", Request{Verb: "get", Path: "/leasehold/v1/backup"}, Admin},
	} {
		if got := Classify(&tc.r); got != tc.want {
			t.Errorf("%s: Classify = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestFlowIsUserElseAddress(t *testing.T) {
	a := Request{User: "alice", Addr: "10.0.0.1"}
	b := Request{Addr: "10.0.0.1"}
	if a.Flow() == b.Flow() {
		t.Fatalf("an authenticated user and an anonymous client at the same address share flow %q", a.Flow())
	}
	c := Request{User: "alice", Addr: "10.0.0.2"}
	if a.Flow() != c.Flow() {
		t.Fatalf("one user from two addresses got flows %q and %q", a.Flow(), c.Flow())
	}
}

// TestFairnessAcrossFlows fills a one-seat class with a noisy flow's
// requests, then queues one request of a quiet flow: the quiet one is
// served second, not behind the noisy flow's whole queue.
func TestFairnessAcrossFlows(t *testing.T) {
	l := newLevel(Workload, 1, 10)
	ctx := context.Background()
	if _, reason := l.acquire(ctx, "noisy", 1, time.Minute); reason != "" {
		t.Fatal(reason)
	}
	order := make(chan string, 10)
	queued := func(flow string, n int) {
		go func() {
			w, reason := l.acquire(ctx, flow, 1, time.Minute)
			if reason != "" {
				order <- "rejected:" + reason
				return
			}
			order <- flow
			l.release(w)
		}()
		waitQueued(t, l, flow, n)
	}
	for i := range 5 {
		queued("noisy", i+1)
	}
	queued("quiet", 1)
	l.release(1) // the first noisy request ends
	got := []string{<-order, <-order}
	// Round-robin: one request of the noisy flow (the head of the turn),
	// then the quiet flow's, before the rest of the noisy queue.
	if got[0] != "noisy" || got[1] != "quiet" {
		t.Fatalf("service order starts %v; want noisy then quiet", got)
	}
	for range 4 {
		if f := <-order; f != "noisy" {
			t.Fatalf("then %s; want the rest of noisy", f)
		}
	}
}

// waitQueued waits until flow has n requests queued.
func waitQueued(t *testing.T, l *level, flow string, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		got := 0
		if f := l.flows[flow]; f != nil {
			got = len(f.q)
		}
		l.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFullQueueRejects: a flow may queue flowLen requests; the next one
// is rejected at once as queue-full, while another flow still queues.
func TestFullQueueRejects(t *testing.T) {
	l := newLevel(List, 1, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.acquire(ctx, "a", 1, time.Minute)
	for i := range 2 {
		go l.acquire(ctx, "a", 1, time.Minute)
		waitQueued(t, l, "a", i+1)
	}
	if _, reason := l.acquire(ctx, "a", 1, time.Minute); reason != ReasonQueueFull {
		t.Fatalf("third queued request of one flow: reason %q, want %q", reason, ReasonQueueFull)
	}
	go l.acquire(ctx, "b", 1, time.Minute)
	waitQueued(t, l, "b", 1)
	if got := l.rejected[0].Load(); got != 1 {
		t.Fatalf("queue-full rejections = %d, want 1", got)
	}
}

// TestLeaderElectionNotStarvedByLists holds every LIST seat and fills the
// LIST queues; a renewal is still admitted at once.
func TestLeaderElectionNotStarvedByLists(t *testing.T) {
	c := New(Config{TotalSeats: 20, QueueWait: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	list := Request{IsResourceRequest: true, Verb: "list", Resource: "leases", Path: "/apis/coordination.k8s.io/v1/namespaces/big/leases", FullList: true, Addr: "10.0.0.9"}
	held, err := c.Admit(ctx, &list)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Done()
	for range 5 {
		go c.Admit(ctx, &list)
	}
	for c.levels[List].stats().queued < 5 {
		time.Sleep(time.Millisecond)
	}
	renew := Request{IsResourceRequest: true, Verb: "update", Resource: "leases", BodyBytes: 900, Addr: "10.0.0.9"}
	tk, err := c.Admit(ctx, &renew)
	if err != nil {
		t.Fatalf("a renewal while LISTs fill their class: %v", err)
	}
	if tk.Class != LeaderElection {
		t.Fatalf("renewal admitted as %s", tk.Class)
	}
	tk.Done()
}

// TestListWidthFollowsObservedSize: the first LIST of a collection takes
// the whole class; once its size is known, small LISTs share the class.
func TestListWidthFollowsObservedSize(t *testing.T) {
	c := New(Config{TotalSeats: 400, QueueWait: time.Minute})
	ctx := context.Background()
	r := Request{IsResourceRequest: true, Verb: "list", Resource: "leases", Path: "/apis/coordination.k8s.io/v1/namespaces/small/leases", FullList: true, Addr: "a"}
	first, err := c.Admit(ctx, &r)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.levels[List].stats(); st.used != st.seats {
		t.Fatalf("first LIST of an unknown collection holds %d of %d seats; want all", st.used, st.seats)
	}
	first.Observe(3000)
	first.Done()
	first.ReleaseBytes()
	var tickets []*Ticket
	for range 10 {
		tk, err := c.Admit(ctx, &r)
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	if st := c.levels[List].stats(); st.used != 10 || st.executing != 10 {
		t.Fatalf("ten small LISTs hold %d seats in %d requests; want one seat each", st.used, st.executing)
	}
	if got := c.bytes.inUse(); got != 10*3000 {
		t.Fatalf("ten LISTs of 3000 bytes hold %d bytes of the budget", got)
	}
	for _, tk := range tickets {
		tk.Done()
		tk.ReleaseBytes()
		tk.ReleaseBytes() // idempotent
	}
	if got := c.bytes.inUse(); got != 0 {
		t.Fatalf("budget still holds %d bytes", got)
	}
}

// TestListBytesBudgetBoundsConcurrentLists: 48 LISTs of 4 MB each against
// a 16 MB budget: at most four hold budget at once, and a fifth waits
// until one is written.
func TestListBytesBudgetBoundsConcurrentLists(t *testing.T) {
	c := New(Config{TotalSeats: 4000, ListBytes: 16 << 20, QueueWait: time.Minute,
		Shares: [numClasses]int{List: 100, LeaderElection: 1, Workload: 1, UI: 1, Metrics: 1, Admin: 1}})
	path := "/apis/coordination.k8s.io/v1/namespaces/big/leases"
	c.sizes.observe(path, 4<<20)
	ctx := context.Background()
	r := Request{IsResourceRequest: true, Verb: "list", Resource: "leases", Path: path, FullList: true}
	admitted := make(chan *Ticket, 48)
	for i := range 48 {
		r := r
		r.Addr = string(rune('a' + i%26))
		go func() {
			tk, err := c.Admit(ctx, &r)
			if err != nil {
				t.Error(err)
				admitted <- nil
				return
			}
			tk.Done() // seats back; bytes held "until written"
			admitted <- tk
		}()
	}
	var held []*Ticket
	for range 4 {
		held = append(held, <-admitted)
	}
	for c.bytes.inUse() != 16<<20 {
		time.Sleep(time.Millisecond)
	}
	// The budget is full: no fifth LIST can have been admitted.
	select {
	case tk := <-admitted:
		t.Fatalf("a fifth 4 MB LIST was admitted within a 16 MB budget (%v)", tk)
	default:
	}
	held[0].ReleaseBytes()
	held = append(held[1:], <-admitted)
	for range 43 {
		held[0].ReleaseBytes()
		held = append(held[1:], <-admitted)
	}
	for _, tk := range held {
		tk.ReleaseBytes()
	}
	if got := c.bytes.inUse(); got != 0 {
		t.Fatalf("budget still holds %d bytes", got)
	}
}

func TestQueueWaitRejectsAsTimeout(t *testing.T) {
	c := New(Config{TotalSeats: 6, QueueWait: 10 * time.Millisecond})
	ctx := context.Background()
	r := Request{Path: "/metrics", Verb: "get", Addr: "a"}
	held, err := c.Admit(ctx, &r)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Done()
	_, err = c.Admit(ctx, &r)
	var rej *Rejected
	if !errors.As(err, &rej) || rej.Reason != ReasonTimeout || rej.RetryAfter < 1 || rej.Class != Metrics {
		t.Fatalf("Admit with the class full = %v; want a time-out rejection of class metrics with Retry-After", err)
	}
}

func TestFlagsAndMetrics(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--flowcontrol-shares", "list=5,leader-election=60", "--flowcontrol-queue-lengths", "list=3"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Shares[List] != 5 || cfg.Shares[LeaderElection] != 60 || cfg.Shares[Workload] != 30 || cfg.QueueLengths[List] != 3 {
		t.Fatalf("parsed %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--flowcontrol-shares", "bogus=1"}); err == nil {
		t.Fatal("an unknown class was accepted")
	}
	cfg.TotalSeats = 100
	c := New(cfg)
	var b strings.Builder
	c.WritePrometheus(&b)
	for _, want := range []string{
		`apiserver_flowcontrol_nominal_limit_seats{priority_level="leader-election"} 55`, // 100 x 60/110, rounded up
		`apiserver_flowcontrol_current_inqueue_requests{priority_level="list"} 0`,
		`apiserver_flowcontrol_rejected_requests_total{priority_level="list",reason="queue-full"} 0`,
		`apiserver_flowcontrol_current_executing_requests{priority_level="ui"} 0`,
		"leasehold_flowcontrol_list_bytes_limit 33554432",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestOneLargeWriteAtATime: with the default shares, a 200 KB patch fills
// most of the workload class: a small workload request still runs beside
// it, a second 200 KB patch waits for it.
func TestOneLargeWriteAtATime(t *testing.T) {
	c := New(Config{QueueWait: time.Minute})
	ctx := context.Background()
	patch := Request{IsResourceRequest: true, Verb: "patch", Resource: "leases", BodyBytes: 200_000, Addr: "a"}
	first, err := c.Admit(ctx, &patch)
	if err != nil {
		t.Fatal(err)
	}
	if first.Class != Workload {
		t.Fatalf("200 KB patch classified %s", first.Class)
	}
	small := Request{IsResourceRequest: true, Verb: "create", Resource: "events", BodyBytes: 500, Addr: "b"}
	tk, err := c.Admit(ctx, &small)
	if err != nil {
		t.Fatalf("small workload request beside a large patch: %v", err)
	}
	defer tk.Done()
	if st := c.levels[Workload].stats(); st.executing != 2 {
		t.Fatalf("workload class executes %d requests; want the patch and the small request", st.executing)
	}
	second := make(chan *Ticket, 1)
	go func() {
		tk, err := c.Admit(ctx, &patch)
		if err != nil {
			t.Error(err)
		}
		second <- tk
	}()
	for c.levels[Workload].stats().queued < 1 {
		select {
		case <-second:
			t.Fatal("a second 200 KB patch ran beside the first")
		case <-time.After(time.Millisecond):
		}
	}
	first.Done()
	if tk := <-second; tk != nil {
		tk.Done()
	}
}
