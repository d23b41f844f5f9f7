package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
)

// TestCSRRoundTrip: a joiner's request, signed by its own key, becomes a
// certificate for that key with the names the CA chose, which the joiner
// checks; the CA never sees the private key.
func TestCSRRoundTrip(t *testing.T) {
	ca, err := NewAuthority("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	key, keyPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(keyPEM), "PRIVATE KEY") {
		t.Fatalf("key PEM %q", keyPEM)
	}
	csrPEM, err := CreateCSR(key, "m2", []string{"10.0.0.2", "dev-2.lan"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(csrPEM), "PRIVATE") {
		t.Fatal("the CSR holds a private key")
	}
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The CA signs with the names it decides, not the CSR's.
	certPEM, err := ca.SignPeer("m2", []string{"10.0.0.2"}, csr.PublicKey, DefaultCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckIssued(certPEM, ca.CertPEM, key, "m2"); err != nil {
		t.Fatalf("the joiner refuses its own certificate: %v", err)
	}
	cert, _ := parseCert(certPEM)
	if len(cert.DNSNames) != 0 || len(cert.IPAddresses) != 1 || len(cert.ExtKeyUsage) != 2 {
		t.Errorf("peer certificate names %v %v, usages %v", cert.DNSNames, cert.IPAddresses, cert.ExtKeyUsage)
	}
	clientPEM, err := ca.SignClient("r1", nil, csr.PublicKey, DefaultCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := parseCert(clientPEM)
	if len(client.ExtKeyUsage) != 1 || client.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("client certificate usages %v", client.ExtKeyUsage)
	}

	// The joiner refuses a certificate for another key, name or CA.
	other, _, _ := GenerateKey()
	if err := CheckIssued(certPEM, ca.CertPEM, other, "m2"); err == nil {
		t.Error("a certificate for another key is accepted")
	}
	if err := CheckIssued(certPEM, ca.CertPEM, key, "m3"); err == nil {
		t.Error("a certificate for another name is accepted")
	}
	ca2, _ := NewAuthority("other-ca")
	if err := CheckIssued(certPEM, ca2.CertPEM, key, "m2"); err == nil {
		t.Error("a certificate of another CA is accepted")
	}
}

// TestParseCSRRefusals: a request not signed by its key (altered after
// signing), a weak key, and anything but one PEM request are refused.
func TestParseCSRRefusals(t *testing.T) {
	key, _, _ := GenerateKey()
	csrPEM, _ := CreateCSR(key, "m2", nil)
	block, _ := pem.Decode(csrPEM)
	tampered := append([]byte(nil), block.Bytes...)
	tampered[len(tampered)-5] ^= 0xff // in the signature
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	weakPEM, _ := CreateCSR(weak, "m2", nil)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	p224PEM, _ := CreateCSR(p224, "m2", nil)
	if weakPEM == nil || p224PEM == nil {
		t.Fatal("could not make the weak keys' requests")
	}
	for what, in := range map[string][]byte{
		"tampered":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}),
		"RSA-1024":  weakPEM,
		"P-224":     p224PEM,
		"not PEM":   []byte("x"),
		"two":       append(append([]byte(nil), csrPEM...), csrPEM...),
		"a cert":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}),
		"truncated": csrPEM[:len(csrPEM)/2],
	} {
		if _, err := ParseCSR(in); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}
