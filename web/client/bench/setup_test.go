package bench

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/storage/boltdb"
	"github.com/leasehold/leasehold/web"
)

// TestSetupRetriesTransientAnswers: a create answered 503 (as a cluster
// member answers while its raft leadership moves) is tried again, so the
// setup of --noise's 10,000 leases does not end the run; one stored
// before its answer was lost comes back 409 and counts as there.
func TestSetupRetriesTransientAnswers(t *testing.T) {
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
	// In front of the real server: the first two POSTs of every body are
	// answered 503 before it sees them.
	var mu sync.Mutex
	seen := map[string]int{}
	real := srv.Handler()
	front := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		if string(rc.Method()) == fasthttp.MethodPost {
			mu.Lock()
			seen[string(rc.PostBody())]++
			n := seen[string(rc.PostBody())]
			mu.Unlock()
			if n <= 2 {
				rc.Error(`{"kind":"Status","status":"Failure","code":503}`, fasthttp.StatusServiceUnavailable)
				return
			}
		}
		real(rc)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = front.Serve(ln) }()
	t.Cleanup(func() { _ = front.Shutdown() })

	cfg := Defaults()
	cfg.Server = "http://" + ln.Addr().String()
	cfg.Leases, cfg.Clients = 10, 2
	created, err := setup(context.Background(), &cfg, newClient(&cfg, 4))
	if err != nil || created != cfg.Leases {
		t.Fatalf("setup behind two 503s per create: created %d, err %v; want all %d created", created, err, cfg.Leases)
	}
	mu.Lock()
	defer mu.Unlock()
	for body, n := range seen {
		if n != 3 {
			t.Errorf("create %s was sent %d times, want 3 (two 503s, then stored)", body, n)
		}
	}
}
