package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Validity periods: the CA outlives many serving certificates, which are
// reissued at start when they near expiry, and many cluster certificates
// (members' and replicas'), which their holders renew while they run
// (DefaultCertValidity, RenewAt).
const (
	CAValidity      = 10 * 365 * 24 * time.Hour
	ServingValidity = 365 * 24 * time.Hour
	renewBefore     = 30 * 24 * time.Hour
	// DefaultCertValidity is how long a cluster member's or replica's
	// certificate lasts unless --cluster-cert-validity says otherwise.
	DefaultCertValidity = 365 * 24 * time.Hour
	// MinCertValidity is the shortest accepted: renewal at two thirds of
	// a certificate's life must have room for a retry or two. Anything
	// this short is for tests (the rotation e2e test renews every few
	// seconds); devices want months.
	MinCertValidity = 10 * time.Second
)

// Authority is a CA that can issue certificates.
type Authority struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
	// Chain is appended to every certificate it issues (PEM): the
	// cross-certificates of a CA rotation (ca.go), by which a TLS end
	// that still trusts only an older CA verifies them.
	Chain []byte
}

// NewAuthority creates a self-signed CA.
func NewAuthority(commonName string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	return authorityFrom(der, key)
}

func authorityFrom(der []byte, key crypto.Signer) (*Authority, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// ParseAuthority reads a CA from its PEM certificate and key.
func ParseAuthority(certPEM, keyPEM []byte) (*Authority, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("pki: the CA certificate is not a CA")
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("pki: the CA key holds no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("pki: the CA key cannot sign")
	}
	// A certificate and a key written apart (a CA rotation replaces both
	// files) must be one pair: signing with another key makes
	// certificates nobody verifies.
	if pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("pki: the CA key is not the CA certificate's")
	}
	return &Authority{Cert: cert, Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// IssueServing issues a server certificate for hosts (DNS names and IP
// addresses).
func (a *Authority) IssueServing(commonName string, hosts []string) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	tmpl.DNSNames, tmpl.IPAddresses = splitHosts(hosts)
	return a.issue(tmpl, ServingValidity)
}

// IssuePeer issues a certificate for both ends of mutual TLS, server and
// client, for hosts: what an etcd member presents to its peers and
// clients, and to the other members when it dials them.
// It lasts validity (capped at the CA's own expiry).
func (a *Authority) IssuePeer(commonName string, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	return a.issue(peerTemplate(commonName, hosts), validity)
}

// peerTemplate is the template of a certificate for both ends of mutual
// TLS (IssuePeer, SignPeer).
func peerTemplate(commonName string, hosts []string) *x509.Certificate {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	tmpl.DNSNames, tmpl.IPAddresses = splitHosts(hosts)
	return tmpl
}

// IssueClient issues a client certificate that kube-apiserver (and
// leasehold) read as user commonName in groups (the Organizations).
func (a *Authority) IssueClient(commonName string, groups []string) (certPEM, keyPEM []byte, err error) {
	return a.issue(clientTemplate(commonName, groups), ServingValidity)
}

func clientTemplate(commonName string, groups []string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// IssueLongLivedClient is IssueClient with the CA's validity, for clients
// that nothing renews: a cluster replica's client certificate towards the
// members' etcd, valid as long as the members' own (IssuePeer).
func (a *Authority) IssueLongLivedClient(commonName string, groups []string) (certPEM, keyPEM []byte, err error) {
	return a.issue(clientTemplate(commonName, groups), CAValidity)
}

func (a *Authority) issue(tmpl *x509.Certificate, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	if certPEM, err = a.sign(tmpl, validity, key.Public()); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// serial is a random 128-bit serial number, as RFC 5280 recommends.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("pki: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return cert, nil
}
