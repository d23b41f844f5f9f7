package cluster

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// TestRenewalPoint: a certificate renews at about two thirds of its life
// (within a twenty-fourth either way), at once when a rotation asked
// after it was issued, and not for a rotation older than it.
func TestRenewalPoint(t *testing.T) {
	ca := newTestCA(t, "ca")
	certPEM, _, err := ca.IssuePeer("m1", []string{"127.0.0.1"}, 90*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fp, cert, err := pemFingerprint(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := cert.NotAfter.Sub(cert.NotBefore); got != 99*time.Minute {
		t.Fatalf("a 90-minute certificate is backdated by a tenth of its life: life %s, want 99m", got)
	}
	life := cert.NotAfter.Sub(cert.NotBefore)
	due, at := renewalDue(cert, fp, Credential{}, time.Time{}, cert.NotBefore)
	if due {
		t.Error("a new certificate is due")
	}
	if frac := float64(at.Sub(cert.NotBefore)) / float64(life); frac < 2.0/3-1.0/24 || frac > 2.0/3+1.0/24 {
		t.Errorf("renews at %.3f of its life, want 2/3 ± 1/24", frac)
	}
	if due, _ := renewalDue(cert, fp, Credential{}, time.Time{}, at); !due {
		t.Error("not due at its renewal point")
	}
	issued := cert.NotBefore.Add(9 * time.Minute)
	if due, _ := renewalDue(cert, fp, Credential{Issued: issued}, issued.Add(time.Second), issued.Add(2*time.Second)); !due {
		t.Error("not due after a rotation asked after its issue")
	}
	if due, _ := renewalDue(cert, fp, Credential{Issued: issued}, issued.Add(-time.Second), issued.Add(2*time.Second)); due {
		t.Error("due for a rotation older than it")
	}
	if w := warnWithin(cert.NotBefore, cert.NotAfter); w != life/4 {
		t.Errorf("a short certificate is warned about %s before its expiry, want a quarter of its life", w)
	}
	if w := warnWithin(time.Time{}, time.Time{}.Add(pki.DefaultCertValidity)); w != 30*24*time.Hour {
		t.Errorf("a year's certificate is warned about %s before its expiry, want 30 days", w)
	}
}

// TestRotateCertsRenewsMemberAndReplica: after rotate-certs the member
// renews its own certificate (same key, new one recorded, the previous
// kept for open connections, its peer port presenting the new one) without
// a restart, and a replica's renewal request is answered with a
// certificate for its key; a third certificate drops the first, whose
// client is then refused. Requests not signed by the certificate's key, or
// for a certificate the cluster never admitted, are refused.
func TestRotateCertsRenewsMemberAndReplica(t *testing.T) {
	ctx := context.Background()
	m, ms, ca := trustMember(t)
	before, beforeFP, err := readCert(m.cfg.Paths.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	replicaCert, replicaKeyPEM := admitReplica(t, m, ca, "r1")
	replicaKey := parseKey(t, replicaKeyPEM)
	renewReq := func(certPEM []byte, key crypto.Signer) clusterapi.RenewRequest {
		csr, err := pki.CreateCSR(key, "r1", nil)
		if err != nil {
			t.Fatal(err)
		}
		return clusterapi.RenewRequest{Cert: string(certPEM), CSR: string(csr)}
	}

	// Not due: the answer says when.
	resp, err := ms.Renew(ctx, renewReq(replicaCert, replicaKey))
	if err != nil || resp.Cert != "" || resp.RenewAt.IsZero() {
		t.Fatalf("renewal of a new certificate: %+v, %v; want only its renewal time", resp, err)
	}

	rot, err := ms.RotateCerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The member renews by itself (it follows the record).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, fp, err := readCert(m.cfg.Paths.CertFile)
		if err == nil && fp != beforeFP {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the member did not renew its certificate within 30s of rotate-certs")
		}
		time.Sleep(100 * time.Millisecond)
	}
	after, afterFP, _ := readCert(m.cfg.Paths.CertFile)
	if !after.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(before.PublicKey) {
		t.Error("the renewal changed the member's key")
	}
	m.gate.mu.RLock()
	_, keptOld := m.gate.creds[beforeFP]
	_, recordedNew := m.gate.creds[afterFP]
	m.gate.mu.RUnlock()
	if !keptOld || !recordedNew {
		t.Errorf("after the renewal the record holds the old certificate %t (want true), the new one %t (want true)", keptOld, recordedNew)
	}
	presented := peerCertificate(t, m)
	if Fingerprint(presented) != afterFP {
		t.Error("the peer port still presents the old certificate after the renewal")
	}
	var member clusterapi.Certificate
	for _, c := range ms.Certificates() {
		if c.Kind == KindMember && c.Name == "m1" {
			member = c
		}
	}
	if member.Issued.Before(rot.RequestedAt) || member.ExpiresInSeconds <= 0 || member.Warning != "" {
		t.Errorf("status lists the member's certificate as %+v, want one issued after the rotation, unexpired, no warning", member)
	}

	// The replica, due now, gets a certificate for its key.
	resp, err = ms.Renew(ctx, renewReq(replicaCert, replicaKey))
	if err != nil || resp.Cert == "" {
		t.Fatalf("renewal of a replica after rotate-certs: %+v, %v", resp, err)
	}
	if err := pki.CheckIssued([]byte(resp.Cert), ca.CertPEM, replicaKey, "r1"); err != nil {
		t.Fatalf("the renewed replica certificate: %v", err)
	}
	second := []byte(resp.Cert)
	if _, err := clientWith(t, m, ca.CertPEM, second, replicaKeyPEM).Get(ctx, "/leasehold/x"); err != nil {
		t.Fatalf("the renewed replica certificate is refused: %v", err)
	}
	// A second rotation: the third certificate drops the first.
	if _, err := ms.RotateCerts(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err = ms.Renew(ctx, renewReq(second, replicaKey)); err != nil || resp.Cert == "" {
		t.Fatalf("second renewal: %+v, %v", resp, err)
	}
	// The answer of a renewal can be lost (the device stopped before it
	// stored it, or the network dropped it), and the device renews the
	// same certificate again: however often, the one it holds stays
	// admitted.
	for i := range 2 {
		if resp, err = ms.Renew(ctx, renewReq(second, replicaKey)); err != nil || resp.Cert == "" {
			t.Fatalf("renewal %d of the second certificate again (its answer lost): %+v, %v", i+1, resp, err)
		}
	}
	secondFP, _, _ := pemFingerprint(second)
	if got, _ := m.client.Get(ctx, credentialsPrefix+secondFP); len(got.Kvs) == 0 {
		t.Error("the record dropped the certificate the replica holds after renewals whose answers it never got")
	}
	// The record dropped the first certificate, but a connection with it
	// is still the replica's key, which TLS proved: admitted until the
	// replica is revoked.
	firstFP, _, _ := pemFingerprint(replicaCert)
	if resp, _ := m.client.Get(ctx, credentialsPrefix+firstFP); len(resp.Kvs) != 0 {
		t.Error("the record keeps the replica's first certificate after two renewals")
	}
	first := clientWith(t, m, ca.CertPEM, replicaCert, replicaKeyPEM)
	if _, err := first.Get(ctx, "/leasehold/x"); err != nil {
		t.Errorf("a connection with the replica's first certificate (same key) is refused after two renewals: %v", err)
	}
	if _, err := clientWith(t, m, ca.CertPEM, []byte(resp.Cert), replicaKeyPEM).Get(ctx, "/leasehold/x"); err != nil {
		t.Fatalf("the newest replica certificate is refused: %v", err)
	}

	// Refusals.
	other, _, _ := pki.GenerateKey()
	if _, err := ms.Renew(ctx, renewReq([]byte(resp.Cert), other)); !errors.Is(err, clusterapi.ErrNotAdmitted) {
		t.Errorf("a request signed by another key: %v, want ErrNotAdmitted (it proves no possession)", err)
	}
	minted, mintedKeyPEM, _ := ca.IssueLongLivedClient("r1", nil)
	if _, err := ms.Renew(ctx, renewReq(minted, parseKey(t, mintedKeyPEM))); !errors.Is(err, clusterapi.ErrNotAdmitted) {
		t.Errorf("a certificate the cluster never admitted: %v, want ErrNotAdmitted", err)
	}
	if _, err := ms.Renew(ctx, renewReq(replicaCert, replicaKey)); !errors.Is(err, clusterapi.ErrNotAdmitted) {
		t.Errorf("a certificate dropped by two renewals: %v, want ErrNotAdmitted", err)
	}

	// A device whose certificate nears its expiry without a renewal (off
	// for most of a year): status warns, and so does /readyz's note.
	if ms.CertificatesNote() != "" {
		t.Errorf("a warning with every certificate fresh: %q", ms.CertificatesNote())
	}
	stale, _ := json.Marshal(Credential{Kind: KindReplica, Name: "r-off", Issued: time.Now().Add(-360 * 24 * time.Hour),
		NotAfter: time.Now().Add(5 * 24 * time.Hour), Key: "k"})
	if _, err := m.client.Put(ctx, credentialsPrefix+"0000stale", string(stale)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return ms.CertificatesNote() != "" })
	for _, c := range ms.Certificates() {
		if c.Name == "r-off" && !strings.Contains(c.Warning, "expires in") {
			t.Errorf("the certificate of a device off for a year: %+v, want a warning", c)
		}
	}

	// Revoking the replica ends every certificate of its key, the first
	// one's connection included.
	if err := ms.Remove(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err = first.Get(ctx, "/leasehold/x"); err != nil || time.Now().After(end) {
			break
		}
	}
	wantDenied(t, "the replica's first certificate after its revocation", err)
	if _, err := ms.Renew(ctx, renewReq([]byte(resp.Cert), replicaKey)); !errors.Is(err, clusterapi.ErrNotAdmitted) {
		t.Errorf("renewal of a revoked replica: %v, want ErrNotAdmitted", err)
	}
}

func parseKey(t *testing.T, keyPEM []byte) crypto.Signer {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		t.Fatal("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer)
}

// peerCertificate is the certificate m's peer port presents now.
func peerCertificate(t *testing.T, m *Member) []byte {
	t.Helper()
	certPEM, _ := os.ReadFile(m.cfg.Paths.CertFile)
	keyPEM, _ := os.ReadFile(m.cfg.Paths.KeyFile)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true}} //nolint:gosec // the presented certificate is what is tested
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(m.cfg.AdvertisePeer + "/members")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0].Raw
}

// eventually waits up to d for cond.
func eventually(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %s", d)
		}
	}
}
