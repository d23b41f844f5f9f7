package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/storage"
	"github.com/leasehold/leasehold/storage/etcd"
	"github.com/leasehold/leasehold/storage/storagetest"
)

// freePort is a loopback port free now, below the kernel's ephemeral
// range (32768 and up): a port the kernel handed out for ":0" is handed
// out again to the next outgoing connection of any test running beside
// this one, which took one before etcd bound it ("address already in
// use" in a CI run).
func freePort(t testing.TB) int {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free loopback port in 20000-32000")
	return 0
}

// startMember runs a one-member cluster in dir.
func startMember(t testing.TB, dir string) (*Member, Config) {
	t.Helper()
	cfg := memberConfig(t, newTestCA(t, "test-ca"), dir, "m1", nil)
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(m.Close)
	return m, cfg
}

// TestConformanceOnEmbeddedMember runs the storage contract suite on the
// etcd backend over an embedded member, with the options serve uses for
// one (bounded requests that need a leader, watches that end without one).
// The request bound is serve's availability knob (3 s), not semantics:
// here it is long enough for a machine loaded by other tests, where a
// fsync behind the stress test's CAS workers can outlast 3 s.
func TestConformanceOnEmbeddedMember(t *testing.T) {
	m, cfg := startMember(t, t.TempDir())
	tlsCfg, err := etcd.TLSConfig(cfg.Paths.CAFile, cfg.Paths.CertFile, cfg.Paths.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		s, err := etcd.Open(context.Background(), etcd.Options{
			Endpoints: []string{m.ClientURL()}, Prefix: "/conformance", TLS: tlsCfg,
			CompactInterval: -1, RequestTimeout: 30 * time.Second, EndWatchesWithoutLeader: true,
			WatchQueueLimit: storagetest.SlowWatcherWrites / 4, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestMemberStatusAndRestart checks what "leasehold cluster status" shows
// of a single member, that unknown members cannot be removed, and that a
// member restarts from its state and data alone.
func TestMemberStatusAndRestart(t *testing.T) {
	dir := t.TempDir()
	m, _ := startMember(t, dir)
	ctx := context.Background()
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Leader != "m1" || len(st.Members) != 1 || !st.Members[0].Healthy || !st.Members[0].Leader ||
		st.Members[0].RaftIndex == 0 || st.Members[0].DBSize == 0 {
		t.Errorf("Status = %+v, want m1 alone, healthy, leading, with a raft index and a db size", st)
	}
	if !m.HasLeader() {
		t.Error("HasLeader = false on a single member that leads (what leasehold_cluster_has_leader reports)")
	}
	if got := m.ClientURLs(); len(got) != 1 || got[0] != m.ClientURL() {
		t.Errorf("ClientURLs = %q, want [%s] (what a replica is given)", got, m.ClientURL())
	}
	if err := m.Remove(ctx, "nobody"); !errors.Is(err, ErrNoSuchMember) {
		t.Errorf("Remove(nobody) = %v, want ErrNoSuchMember", err)
	}
	m.Close()

	p := PathsIn(dir)
	state, err := LoadState(p)
	if err != nil {
		t.Fatalf("LoadState after a run: %v", err)
	}
	again, err := Start(ctx, Config{State: state, Paths: p, Join: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("restart from the data directory: %v", err)
	}
	defer again.Close()
	if st, err := again.Status(ctx); err != nil || st.Leader != "m1" {
		t.Errorf("after the restart: Status = %+v, %v", st, err)
	}
	if _, err := LoadState(PathsIn(filepath.Join(dir, "elsewhere"))); err == nil {
		t.Errorf("LoadState of an empty directory succeeded")
	}
}

// TestFreshClustersGetTheirOwnIDs: two clusters bootstrapped on the same
// peer URL with the same member name get different cluster IDs (etcd
// derives them from the bootstrap token), and a restart keeps its own.
func TestFreshClustersGetTheirOwnIDs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first, cfg := startMember(t, dir)
	firstID := first.etcd.Server.Cluster().ID()
	first.Close()

	again, err := Start(ctx, Config{State: cfg.State, Paths: cfg.Paths, Join: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	if id := again.etcd.Server.Cluster().ID(); id != firstID {
		t.Errorf("the restarted member's cluster ID is %s, was %s", id, firstID)
	}
	again.Close()

	second, err := Start(ctx, memberConfig(t, newTestCA(t, "other-ca"), t.TempDir(), "m1", &cfg.State))
	if err != nil {
		t.Fatalf("a second cluster on the same peer URL: %v", err)
	}
	defer second.Close()
	if id := second.etcd.Server.Cluster().ID(); id == firstID {
		t.Errorf("two fresh clusters on the same peer URL share the cluster ID %s", id)
	}
}
