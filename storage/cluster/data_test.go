package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/internal/pki"
)

// testCA is a cluster CA, as Provision makes one.
type testCA = pki.Authority

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	ca, err := pki.NewAuthority(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// writeMember writes the CA and a peer certificate for member name on
// 127.0.0.1 into p.
func writeMember(t testing.TB, ca *testCA, p Paths, name string) {
	t.Helper()
	cert, key, err := ca.IssuePeer(name, []string{"127.0.0.1"}, pki.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{p.CAFile: ca.CertPEM, p.CertFile: cert, p.KeyFile: key} {
		if err := WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// recordMember admits c's certificate on m's cluster, as a join does
// before it adds the learner.
func recordMember(t *testing.T, m *Member, c Config) {
	t.Helper()
	cert, err := os.ReadFile(c.Paths.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recordCredential(context.Background(), m.client, cert, KindMember, c.Name); err != nil {
		t.Fatal(err)
	}
}

// joinMember admits the member of c through m as the join does (its
// certificate recorded, a learner added) and starts it; c is left as
// the member was started with.
func joinMember(ctx context.Context, t *testing.T, m *Member, c *Config) *Member {
	t.Helper()
	recordMember(t, m, *c)
	ad, err := m.AddLearner(ctx, c.Name, c.AdvertisePeer)
	if err != nil {
		t.Fatal(err)
	}
	c.InitialCluster, c.Join = ad.InitialCluster, true
	joined, err := Start(ctx, *c)
	if err != nil {
		t.Fatalf("join %s: %v", c.Name, err)
	}
	return joined
}

// memberConfig lays out member name in dir on two free loopback ports
// (or those of like, when given) with a certificate of ca.
func memberConfig(t testing.TB, ca *testCA, dir, name string, like *State) Config {
	t.Helper()
	p := PathsIn(dir)
	writeMember(t, ca, p, name)
	st := State{Name: name}
	if like != nil {
		st.ListenPeer, st.ListenClient, st.AdvertisePeer, st.AdvertiseClient = like.ListenPeer, like.ListenClient, like.AdvertisePeer, like.AdvertiseClient
	} else {
		peer, client := freePort(t), freePort(t)
		st.ListenPeer, st.ListenClient = fmt.Sprintf("127.0.0.1:%d", peer), fmt.Sprintf("127.0.0.1:%d", client)
		st.AdvertisePeer, st.AdvertiseClient = "https://"+st.ListenPeer, "https://"+st.ListenClient
	}
	if err := SaveState(p, st); err != nil {
		t.Fatal(err)
	}
	return Config{State: st, Paths: p, Logger: slog.New(slog.DiscardHandler), StartTimeout: time.Minute}
}

// TestImport: the records of another store become a new cluster's data,
// with its revision past the other store's and older revisions compacted,
// so that a client's old resourceVersion can only end in a relist. A
// failed import leaves no data directory, and the next one starts afresh.
func TestImport(t *testing.T) {
	ctx := context.Background()
	cfg := memberConfig(t, newTestCA(t, "ca"), t.TempDir(), "m1", nil)
	const n, sourceRev = 1000, 5000
	records := func(fail int) func(put func(string, []byte) error) (int64, error) {
		return func(put func(string, []byte) error) (int64, error) {
			for i := range n {
				if i == fail {
					return 0, errors.New("the source failed")
				}
				if err := put(fmt.Sprintf("/registry/coordination.k8s.io/leases/default/l%04d", i), []byte(strings.Repeat("v", i%300))); err != nil {
					return 0, err
				}
			}
			return sourceRev, nil
		}
	}
	if _, err := Import(ctx, cfg, "/pfx", records(500)); err == nil || !strings.Contains(err.Error(), "the source failed") {
		t.Fatalf("Import with a failing source = %v", err)
	}
	for _, dir := range []string{cfg.Paths.EtcdDir, cfg.Paths.ImportDir} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after a failed import %s exists (%v)", dir, err)
		}
	}
	start := time.Now()
	res, err := Import(ctx, cfg, "/pfx", records(-1))
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	t.Logf("imported %d records in %s; revision %d", res.Records, time.Since(start).Round(time.Millisecond), res.Revision)
	if res.Records != n || res.SourceRevision != sourceRev || res.Revision <= sourceRev {
		t.Errorf("Import = %+v, want %d records and a revision above %d", res, n, sourceRev)
	}
	if _, err := os.Stat(cfg.Paths.ImportDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the import's temporary directory is left (%v)", err)
	}

	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start after the import: %v", err)
	}
	defer m.Close()
	resp, err := m.client.Get(ctx, "/pfx/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != n || string(resp.Kvs[299].Value) != strings.Repeat("v", 299) {
		t.Errorf("the cluster holds %d records (want %d) or a wrong value", len(resp.Kvs), n)
	}
	// The first start adds one write: the record of its credentials.
	if resp.Header.Revision != res.Revision+1 {
		t.Errorf("revision %d, want %d (the import's, then the credentials record)", resp.Header.Revision, res.Revision+1)
	}
	if _, err := m.client.Get(ctx, "/pfx/", clientv3.WithPrefix(), clientv3.WithRev(sourceRev)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("a read at the old store's revision: %v, want compacted", err)
	}
	w := m.client.Watch(ctx, "/pfx/", clientv3.WithPrefix(), clientv3.WithRev(100))
	if wr := <-w; wr.CompactRevision == 0 {
		t.Errorf("a watch from an old revision: %+v, want it compacted (the client relists)", wr)
	}
}

// TestSnapshotAndRestore: a follower's snapshot checks out, a damaged one
// does not; restored, it is a new one-member cluster with the data, a
// revision far past the old one and a new CA, and a member of the old
// cluster cannot reach it, let alone join it.
func TestSnapshotAndRestore(t *testing.T) {
	ctx := context.Background()
	oldCA := newTestCA(t, "old-ca")
	layout1 := datadir.At(t.TempDir())
	c1 := memberConfig(t, oldCA, layout1.Member().Dir, "m1", nil)
	m1, err := Start(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	c2 := memberConfig(t, oldCA, t.TempDir(), "m2", nil)
	m2 := joinMember(ctx, t, m1, &c2)
	defer m2.Close()
	for i := range 20 {
		if _, err := m1.client.Put(ctx, fmt.Sprintf("/leasehold/registry/namespaces/ns%02d", i), "ok"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m1.client.Put(ctx, "/leasehold/registry/namespaces/bad", "bad"); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.client.Delete(ctx, "/leasehold/registry/namespaces/ns00"); err != nil {
		t.Fatal(err)
	}
	last, err := m1.client.Put(ctx, "/other/key", "x")
	if err != nil {
		t.Fatal(err)
	}
	oldRev := last.Header.Revision

	snap := filepath.Join(t.TempDir(), "snap.db")
	// The barrier read makes the follower apply the last write before
	// its snapshot: no waiting for it to catch up.
	info, err := m2.SaveSnapshot(ctx, snap)
	if err != nil {
		t.Fatalf("SaveSnapshot on the follower: %v", err)
	}
	if info.Revision < oldRev {
		t.Errorf("the follower's snapshot has revision %d, below %d, the last write's (acknowledged before it)", info.Revision, oldRev)
	}
	if ok, err := IsSnapshot(snap); !ok || err != nil {
		t.Fatalf("IsSnapshot = %v, %v", ok, err)
	}
	var checked []string
	info, err = CheckSnapshot(ctx, snap, "/leasehold", func(key string, value []byte) error {
		checked = append(checked, key)
		if string(value) != "ok" {
			return errors.New("does not decode")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "/registry/namespaces/bad") {
		t.Errorf("CheckSnapshot with an undecodable record: %v", err)
	}
	// 21 keys: 19 namespaces, the bad one, /other/key; and the members'
	// record: the two members' credentials and its enforcement mark.
	if info, err = CheckSnapshot(ctx, snap, "/leasehold", nil); err != nil || info.Revision < oldRev || info.Keys != 24 || info.Prefixed != 20 {
		t.Errorf("CheckSnapshot = %+v, %v; want revision >= %d, 24 keys, 20 under the prefix", info, err, oldRev)
	}

	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "damaged.db")
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 0xff
	for name, content := range map[string][]byte{"flipped byte": bad, "cut short": data[:len(data)-512]} {
		if err := os.WriteFile(damaged, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if ok, err := IsSnapshot(damaged); ok || err != nil {
			t.Errorf("%s: IsSnapshot = %v, %v; want false", name, ok, err)
		}
		if _, err := CheckSnapshot(ctx, damaged, "", nil); !errors.Is(err, ErrNotSnapshot) {
			t.Errorf("%s: CheckSnapshot = %v, want ErrNotSnapshot", name, err)
		}
	}
	// Without m1, m2 has no quorum: it cannot confirm it holds every
	// acknowledged write, and refuses to back up once the caller's
	// deadline ends its wait for a leader.
	m1.Close()
	cut := filepath.Join(t.TempDir(), "cut.db")
	cutCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = m2.SaveSnapshot(cutCtx, cut)
	cancel()
	if !errors.Is(err, ErrNoQuorum) || !strings.Contains(err.Error(), "cannot confirm that it holds every acknowledged write") {
		t.Errorf("SaveSnapshot without a quorum = %v, want a refusal (ErrNoQuorum)", err)
	}
	if _, err := os.Stat(cut); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused snapshot left %s (%v)", cut, err)
	}
	// m2 still runs: a reset of m1 would make a second cluster.
	if _, err := Reset(ctx, layout1, c1.Logger); err == nil || !strings.Contains(err.Error(), "other members of the cluster answer (m2 at "+c2.AdvertiseClient+")") {
		t.Errorf("Reset of m1 while m2 runs = %v, want a refusal naming m2", err)
	}
	if _, err := os.Stat(layout1.Member().RestoreSnapshot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused reset staged a snapshot (%v)", err)
	}
	m2.Close()

	// The restored cluster runs where m1 ran, with a new CA.
	rc := memberConfig(t, newTestCA(t, "new-ca"), t.TempDir(), "r1", &c1.State)
	if InUse(c2.Paths) {
		t.Errorf("InUse of a stopped member's data")
	}
	if err := Restore(ctx, snap, rc, RestoreRevisionBump); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if err := Restore(ctx, snap, rc, RestoreRevisionBump); err == nil {
		t.Errorf("a second Restore over the member succeeded")
	}
	r1, err := Start(ctx, rc)
	if err != nil {
		t.Fatalf("Start the restored member: %v", err)
	}
	defer r1.Close()
	if !InUse(rc.Paths) {
		t.Errorf("InUse of a running member's data = false")
	}
	resp, err := r1.client.Get(ctx, "/leasehold/registry/namespaces/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 20 || resp.Header.Revision < oldRev+RestoreRevisionBump {
		t.Errorf("restored: %d keys at revision %d, want 20 at %d or more", len(resp.Kvs), resp.Header.Revision, oldRev+RestoreRevisionBump)
	}

	// m2's data still names m1's peer URL, where the restored member now
	// listens: it cannot get a quorum there (the new CA refuses it), and
	// the restored cluster stays one member.
	c2.StartTimeout = 5 * time.Second
	c2.InitialCluster = ""
	if old, err := Start(ctx, c2); err == nil {
		old.Close()
		t.Fatalf("a member of the old cluster started against the restored one")
	}
	st, err := r1.Status(ctx)
	if err != nil || len(st.Members) != 1 || st.Members[0].Name != "r1" || !st.Members[0].Healthy {
		t.Errorf("the restored cluster after the old member's attempt: %+v, %v", st, err)
	}
}
