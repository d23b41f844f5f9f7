package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/storage/etcd"
)

// trustMember runs a new one-member cluster (it enforces its credentials
// record) with its CA key, and the Membership that admits and removes.
func trustMember(t *testing.T) (*Member, *Membership, *testCA) {
	t.Helper()
	ca := newTestCA(t, "trust-ca")
	cfg := memberConfig(t, ca, t.TempDir(), "m1", nil)
	if err := WriteFile(cfg.Paths.CAKeyFile, ca.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Prefix, cfg.Token = "/leasehold", []byte("the-first-token-of-this-cluster")
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(m.Close)
	p := &Provisioned{Config: cfg, paths: cfg.Paths, token: cfg.Token, prefix: cfg.Prefix}
	return m, NewMembership(p, m, func(context.Context) (string, error) { return "", nil }, false), ca
}

// admitReplica issues and records a replica's client certificate as a
// join does (Membership.Admit; the e2e tests run the real handshake).
func admitReplica(t *testing.T, m *Member, ca *testCA, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueLongLivedClient(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recordCredential(context.Background(), m.client, certPEM, KindReplica, name); err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// clientWith is an etcd client of m presenting the certificate and key
// (PEM), with no retries beyond one attempt's.
func clientWith(t *testing.T, m *Member, caPEM, certPEM, keyPEM []byte) *clientv3.Client {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": caPEM, "c.crt": certPEM, "c.key": keyPEM}
	for n, data := range files {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg, err := etcd.TLSConfig(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL()}, TLS: tlsCfg, DialTimeout: 5 * time.Second,
		Logger: clientLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// peerGet asks m's peer port for its member list with a client
// certificate, as another member's etcd would dial it.
func peerGet(t *testing.T, m *Member, certPEM, keyPEM []byte) error {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true}} //nolint:gosec // only the server's check of the client is tested
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := hc.Get(m.cfg.AdvertisePeer + "/members")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("%s: got %v, want PermissionDenied", what, err)
	}
}

// TestReplicaLeastPrivilege: a replica's real certificate, from a join,
// reads and writes leasehold's prefix, takes leases and watches there,
// and nothing else: no membership change, compaction, status, other
// prefix, the members' own keys, or a range past the prefix. The peer
// port refuses it at the handshake, where the member's own passes.
func TestReplicaLeastPrivilege(t *testing.T) {
	m, _, ca := trustMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cert, key := admitReplica(t, m, ca, "r1")
	r := clientWith(t, m, ca.CertPEM, cert, key)

	// Lease traffic works.
	lease, err := r.Grant(ctx, 10)
	if err != nil {
		t.Fatalf("replica: lease grant: %v", err)
	}
	if _, err := r.Put(ctx, "/leasehold/leases/a", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("replica: put in its prefix: %v", err)
	}
	if _, err := r.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatalf("replica: keep-alive: %v", err)
	}
	if g, err := r.Get(ctx, "/leasehold", clientv3.WithPrefix()); err != nil || g.Count != 1 {
		t.Fatalf("replica: list its prefix: %v, %v", g, err)
	}
	if _, err := r.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/leasehold/leases/a"), ">", 0)).
		Then(clientv3.OpPut("/leasehold/leases/a", "w")).Else(clientv3.OpGet("/leasehold/leases/a")).Commit(); err != nil {
		t.Fatalf("replica: txn in its prefix: %v", err)
	}
	if _, err := r.MemberList(ctx); err != nil {
		t.Errorf("replica: member list (its client follows the members): %v", err)
	}

	// Everything else is refused.
	_, err = r.MemberAddAsLearner(ctx, []string{"https://127.0.0.1:1"})
	wantDenied(t, "member add", err)
	_, err = r.MemberRemove(ctx, uint64(m.etcd.Server.MemberID()))
	wantDenied(t, "member remove", err)
	_, err = r.Compact(ctx, 1)
	wantDenied(t, "compaction", err)
	_, err = r.Status(ctx, m.ClientURL())
	wantDenied(t, "status", err)
	_, err = r.Put(ctx, "/other/key", "v")
	wantDenied(t, "put outside the prefix", err)
	_, err = r.Get(ctx, tokenKey)
	wantDenied(t, "read the cluster token", err)
	_, err = r.Get(ctx, "/leasehold", clientv3.WithFromKey())
	wantDenied(t, "a range past the prefix", err)
	_, err = r.Txn(ctx).Then(clientv3.OpPut("/leasehold/x", "v"), clientv3.OpDelete(credentialsPrefix, clientv3.WithPrefix())).Commit()
	wantDenied(t, "a txn touching the members' keys", err)
	_, err = r.Defragment(ctx, m.ClientURL())
	wantDenied(t, "defragment", err)
	_, err = r.UserList(ctx)
	wantDenied(t, "auth", err)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	for wr := range r.Watch(wctx, trustPrefix, clientv3.WithPrefix()) {
		if wr.Err() == nil && len(wr.Events) > 0 {
			t.Errorf("replica: watched the members' keys: %v", wr.Events)
		}
		if wr.Err() != nil || wr.Canceled {
			break
		}
	}
	if wctx.Err() != nil {
		t.Errorf("replica: a watch of the members' keys was not refused within 10s")
	}

	// The peer port: the replica's certificate fails the handshake, a
	// member's passes.
	if err := peerGet(t, m, cert, key); err == nil {
		t.Errorf("the peer port accepted a replica's certificate")
	}
	memberCert, _ := os.ReadFile(m.cfg.Paths.CertFile)
	memberKey, _ := os.ReadFile(m.cfg.Paths.KeyFile)
	if err := peerGet(t, m, memberCert, memberKey); err != nil {
		t.Errorf("the peer port refused the member's own certificate: %v", err)
	}
}

// TestRevokeAndMintedCertificates: a certificate minted with the CA's key
// (as a stolen device could) is refused on both ports though the CA
// signed it; revoking
// a replica refuses its next request and ends its open watch, and rotates
// the cluster token, in the record and in the member's token file.
func TestRevokeAndMintedCertificates(t *testing.T) {
	m, ms, ca := trustMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	minted, mintedKey, err := ca.IssuePeer("m1", []string{"127.0.0.1", "localhost"}, pki.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	_, err = clientWith(t, m, ca.CertPEM, minted, mintedKey).Get(ctx, "/leasehold/x")
	wantDenied(t, "a minted member certificate", err)
	if err := peerGet(t, m, minted, mintedKey); err == nil {
		t.Errorf("the peer port accepted a minted member certificate")
	}

	if err := ms.nameTaken("m1", true); !errors.Is(err, clusterapi.ErrMemberExists) {
		t.Errorf("a replica named after a member: %v, want ErrMemberExists", err)
	}
	cert, key := admitReplica(t, m, ca, "r1")
	// The member's mirror of the record follows it within milliseconds.
	for deadline := time.Now().Add(10 * time.Second); !m.gate.names(KindReplica)["r1"] && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := ms.nameTaken("r1", false); !errors.Is(err, clusterapi.ErrMemberExists) {
		t.Errorf("a member named after a replica: %v, want ErrMemberExists", err)
	}
	r := clientWith(t, m, ca.CertPEM, cert, key)
	if _, err := r.Put(ctx, "/leasehold/leases/a", "v"); err != nil {
		t.Fatalf("replica: put: %v", err)
	}
	watch := r.Watch(ctx, "/leasehold/", clientv3.WithPrefix())
	if _, err := r.Put(ctx, "/leasehold/leases/a", "w"); err != nil {
		t.Fatalf("replica: put: %v", err)
	}
	if wr := <-watch; wr.Err() != nil || len(wr.Events) == 0 {
		t.Fatalf("replica: watch before the revocation: %v", wr.Err())
	}
	oldToken := bytes.Clone(ms.Token())

	start := time.Now()
	if err := ms.Remove(ctx, "r1"); err != nil {
		t.Fatalf("revoke r1: %v", err)
	}
	_, err = r.Get(ctx, "/leasehold/leases/a")
	wantDenied(t, "the revoked replica's next request", err)
	ended := false
	for wr := range watch {
		if wr.Err() != nil || wr.Canceled {
			ended = true
			break
		}
	}
	if !ended {
		// The channel closes only when ctx ends or the stream fails.
		t.Errorf("the revoked replica's watch did not end")
	}
	t.Logf("MEASURED: revoking a replica refused its requests and ended its watch in %v", time.Since(start).Round(time.Millisecond))

	newToken := ms.Token()
	if len(newToken) != 64 || bytes.Equal(newToken, oldToken) {
		t.Errorf("the cluster token after a revocation is %q (was %q), want a new 256-bit one", newToken, oldToken)
	}
	var file []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if file, _ = os.ReadFile(m.cfg.Paths.TokenFile); strings.TrimSpace(string(file)) == string(newToken) {
			break
		}
	}
	if strings.TrimSpace(string(file)) != string(newToken) {
		t.Errorf("the token file holds %q, want the rotated token", file)
	}
	if fi, err := os.Stat(m.cfg.Paths.TokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file: %v, %v; want mode 0600", fi, err)
	}
	if err := ms.Remove(ctx, "r1"); !errors.Is(err, ErrNoSuchMember) {
		t.Errorf("revoking r1 again: %v, want ErrNoSuchMember", err)
	}
}

// TestRevokedMemberPeerConnectionsClose: revoking a member's certificate
// closes its open connections to the others' peer ports and refuses its
// new ones (its etcd redials at once).
func TestRevokedMemberPeerConnectionsClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ca := newTestCA(t, "peer-ca")
	c1 := memberConfig(t, ca, t.TempDir(), "m1", nil)
	m1, err := Start(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	c2 := memberConfig(t, ca, t.TempDir(), "m2", nil)
	m2 := joinMember(ctx, t, m1, &c2)
	defer m2.Close()
	fp2 := m2.gate.self
	open := func() int {
		m1.peers.mu.Lock()
		defer m1.peers.mu.Unlock()
		return len(m1.peers.conns[fp2])
	}
	if n := open(); n == 0 {
		t.Fatalf("m2 holds no connection to m1's peer port")
	}
	if _, err := revokeCredentials(ctx, m1.client, KindMember, "m2"); err != nil {
		t.Fatalf("revoke m2: %v", err)
	}
	// m2's etcd redials all along: none of its connections may stay open.
	deadline, quiet := time.Now().Add(30*time.Second), time.Time{}
	for ; ; time.Sleep(20 * time.Millisecond) {
		if open() != 0 {
			quiet = time.Time{}
		} else if quiet.IsZero() {
			quiet = time.Now()
		} else if time.Since(quiet) > time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m2 still holds %d connections to m1's peer port 30s after its revocation", open())
		}
	}
	cert, _ := os.ReadFile(c2.Paths.CertFile)
	key, _ := os.ReadFile(c2.Paths.KeyFile)
	if err := peerGet(t, m1, cert, key); err == nil {
		t.Errorf("m1's peer port still accepts m2's revoked certificate")
	}

	// m1 keeps the record for its next start's peer port: enforced, with
	// itself and without m2.
	data, err := os.ReadFile(filepath.Join(c1.Paths.Dir, "trust.json"))
	if err != nil {
		t.Fatalf("the kept record: %v", err)
	}
	g := newGate("/leasehold", "", filepath.Join(c1.Paths.Dir, "trust.json"), slog.New(slog.DiscardHandler), nil)
	if !g.fromFile || !g.enforce || g.creds[m1.gate.self].Name != "m1" || g.creds[fp2].Name != "" {
		t.Errorf("the kept record %s reads back as enforce=%v, %v; want enforced, m1 and not m2", data, g.enforce, g.creds)
	}
	for _, tc := range []struct {
		file string
		ok   bool
	}{{c1.Paths.CertFile, true}, {c2.Paths.CertFile, false}} {
		pemData, _ := os.ReadFile(tc.file)
		_, leaf, err := pemFingerprint(pemData)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.peerAdmitted(leaf); (err == nil) != tc.ok {
			t.Errorf("before the record is read, the kept copy admits %s: %v, want %v", leaf.Subject.CommonName, err, tc.ok)
		}
	}
}
