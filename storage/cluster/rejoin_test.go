package cluster

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// TestRenewExpiredCertificate: the renewal endpoint's decisions for a
// device back after its certificate expired. It renews only when the
// record still holds the expired certificate, the request is signed by its
// key and proves the current cluster token over its session and nonce;
// each refusal is a 403 (ErrNotAdmitted) saying what to do. A certificate
// that has not expired takes the usual path, proof or not.
func TestRenewExpiredCertificate(t *testing.T) {
	ctx := context.Background()
	m, ms, ca := trustMember(t)

	// Three devices whose certificates last about a second: one stays
	// admitted, one is revoked while it is off, one keeps a fresh
	// certificate.
	issue := func(name string, validity time.Duration) ([]byte, crypto.Signer) {
		t.Helper()
		key, _, err := pki.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err := ca.SignClient(name, nil, key.Public(), validity)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recordCredential(ctx, m.client, certPEM, KindReplica, name); err != nil {
			t.Fatal(err)
		}
		return certPEM, key
	}
	// expireAll waits until every certificate of certs has expired (a
	// certificate's times are whole seconds).
	expireAll := func(certs ...[]byte) {
		for _, c := range certs {
			cert, err := pki.ParseCertificate(c)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Until(cert.NotAfter) + 100*time.Millisecond)
		}
	}
	offCert, offKey := issue("r-off", time.Second)
	goneCert, goneKey := issue("r-gone", time.Second)
	freshCert, freshKey := issue("r-fresh", time.Hour)
	eventually(t, 5*time.Second, func() bool { return m.gate.names(KindReplica)["r-gone"] })
	if err := ms.Remove(ctx, "r-gone"); err != nil {
		t.Fatalf("revoke r-gone: %v", err)
	}
	expireAll(offCert, goneCert)

	session := []byte("the TLS session's keying material")
	nonce := strings.Repeat("ab", clusterapi.NonceBytes)
	request := func(certPEM []byte, key crypto.Signer, token []byte) clusterapi.RenewRequest {
		t.Helper()
		csr, err := pki.CreateCSR(key, "whatever the CSR says", nil)
		if err != nil {
			t.Fatal(err)
		}
		req := clusterapi.RenewRequest{Cert: string(certPEM), CSR: string(csr), Session: session}
		if token != nil {
			req.Nonce = nonce
			req.Proof = clusterapi.RenewProof(token, session, &req)
		}
		return req
	}
	refused := func(what string, req clusterapi.RenewRequest, want string) {
		t.Helper()
		resp, err := ms.Renew(ctx, req)
		if !errors.Is(err, clusterapi.ErrNotAdmitted) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %+v, %v; want ErrNotAdmitted (403) saying %q", what, resp, err, want)
		}
	}
	// The revocation rotated the token: the one this member follows is
	// the record's once it applied it.
	token := currentToken(t, m)
	eventually(t, 5*time.Second, func() bool { return bytes.Equal(ms.Token(), token) })

	refused("an expired certificate without a proof of the token", request(offCert, offKey, nil), "needs a proof of the current cluster token")
	refused("an expired certificate with a wrong token", request(offCert, offKey, []byte("not-the-token-of-this-cluster")), "--cluster-token-file")
	otherKey, _, _ := pki.GenerateKey()
	refused("an expired certificate, the request signed by another key", request(offCert, otherKey, token), "not signed by the certificate's key")
	refused("a revoked device's expired certificate", request(goneCert, goneKey, token), "must join again")
	replayed := request(offCert, offKey, token)
	replayed.Session = []byte("another TLS session")
	refused("a proof made on another session", replayed, "--cluster-token-file")
	minted, mintedKeyPEM, _ := ca.IssueLongLivedClient("r-off", nil)
	refused("a certificate the cluster never admitted", request(minted, parseKey(t, mintedKeyPEM), token), "does not admit this certificate")

	// A certificate that has not expired takes the usual path: not due,
	// the answer says when, whether a proof came with it or not.
	for _, tok := range [][]byte{nil, token} {
		resp, err := ms.Renew(ctx, request(freshCert, freshKey, tok))
		if err != nil || resp.Cert != "" || resp.RenewAt.IsZero() {
			t.Errorf("a fresh certificate (proof %t): %+v, %v; want only its renewal time", tok != nil, resp, err)
		}
	}

	// Held, signed by its key, the current token: renewed, for its key
	// and name, recorded beside the expired one.
	resp, err := ms.Renew(ctx, request(offCert, offKey, token))
	if err != nil || resp.Cert == "" {
		t.Fatalf("an expired certificate with its key and the current token: %+v, %v; want a renewal", resp, err)
	}
	if err := pki.CheckIssued([]byte(resp.Cert), ca.CertPEM, offKey, "r-off"); err != nil {
		t.Fatalf("the renewal: %v", err)
	}
	renewed, _ := pki.ParseCertificate([]byte(resp.Cert))
	if !renewed.NotAfter.After(time.Now().Add(time.Hour)) {
		t.Errorf("the renewal expires at %s, want the member's validity from now", renewed.NotAfter)
	}
	fp, _, _ := pemFingerprint([]byte(resp.Cert))
	if got, _ := m.client.Get(ctx, credentialsPrefix+fp); len(got.Kvs) != 1 {
		t.Error("the renewal is not recorded")
	}
	block, _ := pem.Decode([]byte(resp.Cert))
	if _, err := clientWith(t, m, ca.CertPEM, pem.EncodeToMemory(block), keyPEMOf(t, offKey)).Get(ctx, "/leasehold/x"); err != nil {
		t.Errorf("the renewed certificate is refused on the client port: %v", err)
	}

	// After rotate-token, the token the device kept no longer renews it;
	// the refusal says to start it with the current one.
	if err := ms.RotateToken(ctx); err != nil {
		t.Fatal(err)
	}
	rotated := currentToken(t, m)
	eventually(t, 5*time.Second, func() bool { return bytes.Equal(ms.Token(), rotated) })
	lateCert, lateKey := issue("r-late", time.Second)
	expireAll(lateCert)
	refused("an expired certificate with the token from before rotate-token", request(lateCert, lateKey, token), "not the cluster's current one")
	if resp, err := ms.Renew(ctx, request(lateCert, lateKey, rotated)); err != nil || resp.Cert == "" {
		t.Errorf("the same with the rotated token: %+v, %v; want a renewal", resp, err)
	}
}

// currentToken is the cluster token the record holds now.
func currentToken(t *testing.T, m *Member) []byte {
	t.Helper()
	resp, err := m.client.Get(context.Background(), tokenKey)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the cluster token: %v", err)
	}
	return resp.Kvs[0].Value
}

// keyPEMOf is key in PKCS#8 PEM.
func keyPEMOf(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestRenewURLs: a device renews through --join first, then the member
// it joined through, then the other members it kept, each once; a member
// announces its API at its advertised host when it listens on loopback
// or a wildcard (reported as loopback) and advertises another address.
func TestRenewURLs(t *testing.T) {
	got := renewURLs("http://a:1", "http://b:2", "http://b:2", "http://c:3", "")
	if strings.Join(got, " ") != "http://a:1 http://b:2 http://c:3" {
		t.Errorf("renewURLs: %q", got)
	}
	if got := renewURLs("", ""); len(got) != 0 {
		t.Errorf("renewURLs of nothing: %q", got)
	}
	for _, c := range []struct{ server, advertise, want string }{
		{"https://127.0.0.1:8443", "https://10.0.0.5:2379", "https://10.0.0.5:8443"},
		{"https://127.0.0.1:8443", "https://127.0.0.1:2379", "https://127.0.0.1:8443"},
		{"https://192.168.1.2:8443", "https://10.0.0.5:2379", "https://192.168.1.2:8443"},
		{"http://[::1]:8080", "https://[fd00::5]:2379", "http://[fd00::5]:8080"},
	} {
		if got := apiURLFor(c.server, c.advertise); got != c.want {
			t.Errorf("apiURLFor(%s, %s) = %s, want %s", c.server, c.advertise, got, c.want)
		}
	}
}

// TestAnnounceAPI: a serving member records its API URL in the cluster's
// record; the URLs it keeps for its own renewals are the other members'
// only (not its own, not a name that is no member).
func TestAnnounceAPI(t *testing.T) {
	ctx := context.Background()
	m, ms, _ := trustMember(t)
	ms.AnnounceAPI("http://127.0.0.1:18443")
	eventually(t, 5*time.Second, func() bool {
		resp, err := m.client.Get(ctx, apiPrefix+"m1")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "http://127.0.0.1:18443"
	})
	if _, err := m.client.Put(ctx, apiPrefix+"gone", "http://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	// The follower saw both writes: the file it keeps lists no one.
	time.Sleep(200 * time.Millisecond)
	if got := memberAPIs(m.cfg.Paths); len(got) != 0 {
		t.Errorf("a lone member keeps API URLs %q, want none (its own and a non-member's are not kept)", got)
	}
}
