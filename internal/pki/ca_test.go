package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"
)

// rotation is an old CA, a new one cross-signed by it, and the new one
// issuing with the cross-certificate as its chain.
func rotation(t *testing.T) (old, next *Authority, cross []byte) {
	t.Helper()
	old, err := NewAuthority("old-ca")
	if err != nil {
		t.Fatal(err)
	}
	next, err = NewAuthority("new-ca")
	if err != nil {
		t.Fatal(err)
	}
	if cross, err = old.CrossSign(next.Cert); err != nil {
		t.Fatal(err)
	}
	next.Chain = cross
	return old, next, cross
}

// TestCrossSignedChains: a certificate of the new CA verifies against
// the old CA alone (through the cross-certificate it carries), the new CA
// alone and both; not against an unrelated CA. VerifyChain checks it as
// of the middle of the certificate's life, whatever the clock says.
func TestCrossSignedChains(t *testing.T) {
	old, next, _ := rotation(t)
	other, err := NewAuthority("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := next.SignPeer("m1", []string{"127.0.0.1"}, key.Public(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ParseCertificates(certPEM)
	if err != nil || len(chain) != 2 {
		t.Fatalf("an issued certificate carries %d certificates (%v), want itself and the cross-certificate", len(chain), err)
	}
	if IssuerID(chain[0]) != KeyID(next.Cert) || KeyID(chain[1]) != KeyID(next.Cert) || IssuerID(chain[1]) != KeyID(old.Cert) {
		t.Errorf("issuer IDs: leaf by %s, cross %s by %s; want by %s, %s by %s",
			IssuerID(chain[0]), KeyID(chain[1]), IssuerID(chain[1]), KeyID(next.Cert), KeyID(next.Cert), KeyID(old.Cert))
	}
	for _, tc := range []struct {
		name  string
		roots []byte
		ok    bool
	}{
		{"old CA", old.CertPEM, true},
		{"new CA", next.CertPEM, true},
		{"both", append(append([]byte{}, next.CertPEM...), old.CertPEM...), true},
		{"another CA", other.CertPEM, false},
	} {
		if err := VerifyChain(certPEM, tc.roots); (err == nil) != tc.ok {
			t.Errorf("verify against the %s: %v, want ok=%t", tc.name, err, tc.ok)
		}
	}
	if err := CheckIssued(certPEM, old.CertPEM, key, "m1"); err != nil {
		t.Errorf("CheckIssued against the old CA: %v", err)
	}
	// Without the cross-certificate, the old CA does not verify it.
	if err := VerifyChain(certPEM[:len(certPEM)-len(next.Chain)], old.CertPEM); err == nil {
		t.Error("a new CA's certificate without its chain verified against the old CA")
	}
}

// TestCrossSignedHandshake is the rotation's claim on real TLS: a server
// and a client whose trust was loaded once from the old CA (as embedded
// etcd loads its CA file at start) accept each other's certificates
// issued by the new CA, with their chain, in both directions.
func TestCrossSignedHandshake(t *testing.T) {
	old, next, _ := rotation(t)
	pair := func(name string) tls.Certificate {
		certPEM, keyPEM, err := next.IssuePeer(name, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	oldPool := x509.NewCertPool()
	oldPool.AddCert(old.Cert)
	srvCert, cliCert := pair("server"), pair("client")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srvCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: oldPool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			c.Close()
		}
		errc <- err
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(),
		&tls.Config{Certificates: []tls.Certificate{cliCert}, RootCAs: oldPool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("a client trusting the old CA refused the new CA's server certificate: %v", err)
	}
	conn.Close()
	if err := <-errc; err != nil {
		t.Fatalf("a server trusting the old CA refused the new CA's client certificate: %v", err)
	}
}

// TestAcceptTrust: a device adds a CA to its trust only when a CA it
// trusts vouches for it (a cross-certificate in the chain); it may
// always drop one, and refuses what is not a self-signed CA.
func TestAcceptTrust(t *testing.T) {
	old, next, cross := rotation(t)
	other, err := NewAuthority("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	otherCross, err := other.CrossSign(next.Cert)
	if err != nil {
		t.Fatal(err)
	}
	both := append(append([]byte{}, next.CertPEM...), old.CertPEM...)
	for _, tc := range []struct {
		name                   string
		bundle, trusted, chain []byte
		ok                     bool
		wantErr                string
	}{
		{"the same", old.CertPEM, old.CertPEM, nil, true, ""},
		{"new CA vouched for by the old", both, old.CertPEM, cross, true, ""},
		{"new CA alone, vouched for", next.CertPEM, old.CertPEM, cross, true, ""},
		{"the old one dropped", next.CertPEM, both, nil, true, ""},
		{"new CA without a cross-certificate", both, old.CertPEM, nil, false, "not vouched"},
		{"new CA vouched for by an untrusted CA", both, old.CertPEM, otherCross, false, "not vouched"},
		{"a cross-certificate as a CA", cross, old.CertPEM, cross, false, "not a self-signed CA"},
		{"empty", nil, old.CertPEM, nil, false, "empty"},
	} {
		err := AcceptTrust(tc.bundle, tc.trusted, tc.chain)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want ok=%t (%q)", tc.name, err, tc.ok, tc.wantErr)
		}
	}
}

// TestSealKey: the new CA's key sealed under the old CA opens with the
// old CA's key only.
func TestSealKey(t *testing.T) {
	old, next, _ := rotation(t)
	sealed, err := old.SealKey(next.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "PRIVATE KEY") {
		t.Fatal("the sealed key is readable")
	}
	got, err := old.OpenKey(sealed)
	if err != nil || string(got) != string(next.KeyPEM) {
		t.Fatalf("OpenKey with the old CA: %v", err)
	}
	if _, err := next.OpenKey(sealed); err == nil {
		t.Error("another CA's key opened the sealed key")
	}
	if _, err := ParseAuthority(next.CertPEM, old.KeyPEM); err == nil {
		t.Error("ParseAuthority accepted a key that is not the certificate's")
	}
}

// TestChainCapsValidity: a certificate issued with a chain lasts no
// longer than its chain does.
func TestChainCapsValidity(t *testing.T) {
	_, next, _ := rotation(t)
	chain, _ := ParseCertificates(next.Chain)
	key, _, _ := GenerateKey()
	certPEM, err := next.SignClient("r1", nil, key.Public(), 100*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ParseCertificate(certPEM)
	if c.NotAfter.After(chain[0].NotAfter) {
		t.Errorf("NotAfter %s is after its chain's %s", c.NotAfter, chain[0].NotAfter)
	}
}
