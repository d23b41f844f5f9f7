package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeKeyPair writes a self-signed certificate for 127.0.0.1 valid from
// notBefore to notAfter, and its key, into dir; it returns their paths.
func writeKeyPair(t *testing.T, dir string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "clock-test"},
		NotBefore: notBefore, NotAfter: notAfter, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "clock.crt"), filepath.Join(dir, "clock.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestServeWaitsForTheClock: a server whose certificate is valid only
// from a few seconds on (as when the device's clock reads before the
// time the certificate was issued: a device that booted in 1970) waits,
// saying why, and serves once its clock has passed the certificate's
// NotBefore, never before.
func TestServeWaitsForTheClock(t *testing.T) {
	t.Parallel()
	leaseholdBinary(t) // built first: the certificate's dates count from the start
	notBefore := time.Now().Add(3 * time.Second).Truncate(time.Second)
	certFile, keyFile := writeKeyPair(t, t.TempDir(), notBefore, notBefore.Add(24*time.Hour))
	p, ready := spawnServer(t, []string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "info",
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile}, nil)
	readyAt := time.Now()
	if !ready {
		t.Fatalf("server exited with code %d before it was ready; log:\n%s", p.code, p.log.String())
	}
	log := p.log.String()
	for _, want := range []string{"Waiting for the wall clock to be set", "the certificate " + certFile, notBefore.UTC().Format(time.RFC3339), "The wall clock was set"} {
		if !strings.Contains(log, want) {
			t.Errorf("the server's log does not say %q:\n%s", want, log)
		}
	}
	if readyAt.Before(notBefore) {
		t.Errorf("ready at %s, before its certificate's NotBefore %s", readyAt.Format(time.RFC3339Nano), notBefore.Format(time.RFC3339))
	}
	if code, ok := p.stop(15 * time.Second); !ok || code != 0 {
		t.Errorf("stop: code %d (stopped %t); log:\n%s", code, ok, p.log.String())
	}
}

// TestMemberWithExpiredCertificate: a cluster member whose certificate
// expired while the device was off, and that knows no other member to
// renew it through (a lone member; TestClusterRejoinAfterExpiry has one
// that does), refuses to start, naming the certificate and the way back,
// instead of failing its peers' TLS handshakes.
func TestMemberWithExpiredCertificate(t *testing.T) {
	t.Parallel()
	ports := freeLoopbackPorts(t, 2)
	m := &clusterMember{name: "m1", dataDir: t.TempDir(), args: []string{"--cluster-token", "e2e-cluster-token", "--member-name", "m1",
		"--peer-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), "--cluster-client-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), "--cluster-init"}}
	m.start(t)
	m.ts.Stop(t)
	// A year off: the member's certificate ran out meanwhile. Only its
	// dates matter here; the check runs before etcd reads it.
	member := filepath.Join(m.dataDir, "cluster", "pki", "member.crt")
	cert, _ := writeKeyPair(t, t.TempDir(), time.Now().AddDate(-2, 0, 0), time.Now().AddDate(-1, 0, 0))
	data, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(member, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p, ready := spawnServer(t, []string{"--listen", "127.0.0.1:0", "--data-dir", m.dataDir}, nil)
	if ready {
		t.Fatalf("a member with an expired certificate started; log:\n%s", p.log.String())
	}
	log := p.log.String()
	for _, want := range []string{member + " expired at", "leasehold cluster remove m1", "--join"} {
		if !strings.Contains(log, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, log)
		}
	}
}
