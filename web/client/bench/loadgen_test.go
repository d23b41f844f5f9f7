package bench

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
)

// startServer runs a real server (engine on bbolt, fsync on) in this
// process and returns its base URL.
func startServer(t testing.TB) string {
	t.Helper()
	st, err := boltdb.Open(context.Background(), filepath.Join(t.TempDir(), "db"), boltdb.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.NewServer(web.Options{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// TestSmoke is the CI smoke run: a short load with watchers and candidate
// churn against a real server. It checks that the workload works (every
// renewal succeeds, clients owning disjoint leases never conflict, every
// watcher sees every renewal), not how fast it is.
func TestSmoke(t *testing.T) {
	cfg := Defaults()
	cfg.Server = startServer(t)
	cfg.Leases, cfg.Clients = 50, 8
	cfg.Warmup, cfg.Duration = 200*time.Millisecond, 2*time.Second
	cfg.Watchers, cfg.Candidates, cfg.ListRuns = 3, 2, 2
	cfg.ServerPID = 0
	var progress bytes.Buffer
	res, err := Run(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if res.Renewals == 0 || res.Errors != 0 || res.Conflicts != 0 {
		t.Fatalf("renewals %d, errors %d (%s), conflicts %d", res.Renewals, res.Errors, res.FirstError, res.Conflicts)
	}
	if res.Latency.Count != res.Renewals || res.Latency.P50 <= 0 || res.Latency.P99 < res.Latency.P50 {
		t.Errorf("latency summary %+v does not describe %d renewals", res.Latency, res.Renewals)
	}
	if w := res.Watch; w == nil || w.Complete != cfg.Watchers || w.Expected < res.Renewals || w.Lag.Count == 0 {
		t.Errorf("watch result %+v: every watcher should see all of at least %d renewals", w, res.Renewals)
	}
	if c := res.Candidates; c == nil || c.Ops == 0 || c.Errors != 0 {
		t.Errorf("candidate churn %+v", c)
	}
	if l := res.List; l == nil || l.Items != cfg.Leases {
		t.Errorf("list %+v, want %d items", l, cfg.Leases)
	}
	if sl := res.Server; sl == nil || sl.Puts == 0 || sl.Gets == 0 || sl.PutP99Ms <= 0 {
		t.Errorf("server latency %+v: the server's histogram should count the window's renewals", sl)
	}
	var text strings.Builder
	res.WriteText(&text)
	if !strings.Contains(text.String(), "renewals:") {
		t.Errorf("text report:\n%s", text.String())
	}
}

// TestRateCap checks that --rate paces the clients.
func TestRateCap(t *testing.T) {
	cfg := Defaults()
	cfg.Server = startServer(t)
	cfg.Leases, cfg.Clients, cfg.Rate = 20, 4, 100
	cfg.Warmup, cfg.Duration = 0, time.Second
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Renewals == 0 || res.Renewals > 130 {
		t.Fatalf("at most about 100 renewals expected in 1s at --rate 100, got %d (errors %d: %s)", res.Renewals, res.Errors, res.FirstError)
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}} {
		got := h.quantile(c.q)
		if d := got - c.want; d < -c.want/50 || d > c.want/50 {
			t.Errorf("quantile(%v) = %v, want %v within 2%%", c.q, got, c.want)
		}
	}
	for us := uint64(0); us < 1<<30; us = us*3/2 + 1 {
		if lb := lowerBound(bucketOf(us)); lb > us || bucketOf(lb) != bucketOf(us) {
			t.Fatalf("bucket of %d has lower bound %d", us, lb)
		}
	}
}

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, err := ParseFlags([]string{"--clients", "8", "--leases", "100", "--watchers", "2", "--output", "json"}, &stderr)
	if err != nil || cfg.Clients != 8 || cfg.Leases != 100 || cfg.Watchers != 2 || cfg.Output != "json" {
		t.Fatalf("ParseFlags: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{{"--clients", "0"}, {"--clients", "10", "--leases", "5"}, {"--server", "ftp://x"}, {"--server", "https://x", "--watchers", "1"}, {"--server", "https://x", "--noise", "idle"}, {"--output", "xml"}} {
		if _, err := ParseFlags(bad, &stderr); err == nil {
			t.Errorf("ParseFlags(%q) accepted", bad)
		}
	}
	if cfg, err := ParseFlags([]string{"--server", "https://127.0.0.1:6443", "--insecure-skip-tls-verify"}, &stderr); err != nil || !cfg.tls() || !cfg.InsecureSkipTLSVerify {
		t.Errorf("an https peer (kube-apiserver): %+v, %v", cfg, err)
	}
}

func TestParseMicroUTC(t *testing.T) {
	for _, s := range []string{"2026-11-21T16:55:54.123456Z", "1999-01-01T00:00:00.000000Z", "2024-02-29T23:59:59.999999Z"} {
		want, err := time.Parse(microLayout, s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := parseMicroUTC([]byte(s))
		if !ok || got != want.UnixNano() {
			t.Errorf("parseMicroUTC(%q) = %d, %v; want %d", s, got, ok, want.UnixNano())
		}
	}
	for _, s := range []string{"", "2026-11-21T16:55:54.123456+", "2026-11-21 16:55:54.123456Z", "2026-1a-21T16:55:54.123456Z"} {
		if _, ok := parseMicroUTC([]byte(s)); ok {
			t.Errorf("parseMicroUTC(%q) accepted", s)
		}
	}
}

func TestLastRenewTime(t *testing.T) {
	ev := []byte(`{"type":"MODIFIED","object":{"metadata":{"managedFields":[{"fieldsV1":{"f:spec":{"f:renewTime":{}}}}]},"spec":{"holderIdentity":"h","renewTime":"2026-11-21T16:55:54.123456Z","leaseTransitions":0}}}`)
	at := lastRenewTime(ev)
	if at < 0 || string(ev[at:at+27]) != "2026-11-21T16:55:54.123456Z" {
		t.Fatalf("lastRenewTime = %d", at)
	}
	if lastRenewTime([]byte(`{"spec":{}}`)) != -1 {
		t.Fatal("found a renewTime in a lease without one")
	}
}

// TestServerQuantile checks the histogram_quantile estimate over the
// difference of two scrapes, and the parse of a /metrics bucket line.
func TestServerQuantile(t *testing.T) {
	le, n, ok := promBucket(`leasehold_http_request_duration_seconds_bucket{verb="PUT",group="coordination.k8s.io",version="v1",resource="leases",le="0.025"} 1861`)
	if !ok || le != 0.025 || n != 1861 {
		t.Fatalf("promBucket = %v, %d, %v", le, n, ok)
	}
	if _, _, ok := promBucket(`x_bucket{le="abc"} 1`); ok {
		t.Error("promBucket accepted a bound that is not a number")
	}
	inf := math.Inf(1)
	before := promHistogram{0.01: 100, 0.05: 100, 0.1: 100, inf: 100}
	// 100 new observations: 90 under 10 ms, 10 between 50 and 100 ms.
	after := promHistogram{0.01: 190, 0.05: 190, 0.1: 200, inf: 200}
	ms, total := quantile(0.99, before, after)
	if total != 100 {
		t.Fatalf("total %d, want 100", total)
	}
	// Rank 99 lies 9 of the 10 observations into (50 ms, 100 ms]: 95 ms.
	if math.Abs(ms-95) > 1e-9 {
		t.Errorf("p99 = %v ms, want 95", ms)
	}
	if ms, _ := quantile(0.5, before, after); ms <= 0 || ms > 10 {
		t.Errorf("p50 = %v ms, want within the first bucket", ms)
	}
	if ms, total := quantile(0.99, after, after); ms != 0 || total != 0 {
		t.Errorf("no observations: %v ms over %d", ms, total)
	}
	beyond := promHistogram{0.01: 190, 0.05: 190, 0.1: 190, inf: 200}
	if ms, _ := quantile(0.99, before, beyond); ms != 100 {
		t.Errorf("p99 beyond the last bound = %v ms, want that bound (100)", ms)
	}
}

// TestClusterFigures: --member-pids adds the other members' CPU to the
// server's in the cluster figures. Here the "members" are this process
// (which serves too), so the cluster's CPU is three times the server's.
func TestClusterFigures(t *testing.T) {
	cfg := Defaults()
	cfg.Server = startServer(t)
	cfg.Leases, cfg.Clients = 20, 4
	cfg.Warmup, cfg.Duration = 0, time.Second
	cfg.ServerPID = os.Getpid()
	cfg.MemberPIDs = []int{os.Getpid(), os.Getpid()}
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Members) != 2 || res.ServerCPUPerRenewalUS <= 0 || res.ClusterCPUPerRenewalUS < 2.5*res.ServerCPUPerRenewalUS || res.ClusterCores <= res.ServerCores {
		t.Errorf("cluster figures: members %+v, CPU per renewal %.1f us (server alone %.1f us), cores %.2f (server %.2f); want the three samples summed",
			res.Members, res.ClusterCPUPerRenewalUS, res.ServerCPUPerRenewalUS, res.ClusterCores, res.ServerCores)
	}
	var stderr bytes.Buffer
	if parsed, err := ParseFlags([]string{"--server-pid", "7", "--member-pids", "8, 9"}, &stderr); err != nil || len(parsed.MemberPIDs) != 2 || parsed.MemberPIDs[1] != 9 {
		t.Errorf("ParseFlags(--member-pids 8,9) = %v, %v", parsed.MemberPIDs, err)
	}
	for _, bad := range [][]string{{"--member-pids", "8"}, {"--server-pid", "7", "--member-pids", "x"}} {
		if _, err := ParseFlags(bad, &stderr); err == nil {
			t.Errorf("ParseFlags(%q) accepted", bad)
		}
	}
}
