package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"time"
)

// Certificate requests: a joiner generates its key and sends only a
// request signed by it, so no private key crosses the wire; the CA signs
// the request's public key with the subject and names it decides itself.

// GenerateKey makes a new ECDSA P-256 key and its PEM (PKCS #8).
func GenerateKey() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, keyPEM, nil
}

// CreateCSR is a PEM certificate request for commonName and hosts (DNS
// names and IP addresses), signed by key.
func CreateCSR(key crypto.Signer, commonName string, hosts []string) ([]byte, error) {
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}
	tmpl.DNSNames, tmpl.IPAddresses = splitHosts(hosts)
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("pki: create certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParseCSR reads a PEM certificate request and checks that it is signed
// by the key it carries (its sender holds that key) and that the key is
// one a certificate may hold: ECDSA P-256 or P-384, Ed25519, or RSA of at
// least 2048 bits.
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("pki: not one PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("pki: certificate request: %w", err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return nil, errors.New("pki: certificate request: ECDSA keys must be P-256 or P-384")
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, errors.New("pki: certificate request: RSA keys must have at least 2048 bits")
		}
	default:
		return nil, fmt.Errorf("pki: certificate request: unsupported key type %T", k)
	}
	return csr, nil
}

// SignPeer is IssuePeer for a key the holder generated: a certificate for
// both ends of mutual TLS, for commonName and hosts, on pub, lasting
// validity.
func (a *Authority) SignPeer(commonName string, hosts []string, pub crypto.PublicKey, validity time.Duration) ([]byte, error) {
	return a.sign(peerTemplate(commonName, hosts), validity, pub)
}

// SignClient is IssueClient for a key the holder generated, lasting
// validity: a cluster replica's client certificate, which it renews.
func (a *Authority) SignClient(commonName string, groups []string, pub crypto.PublicKey, validity time.Duration) ([]byte, error) {
	return a.sign(clientTemplate(commonName, groups), validity, pub)
}

// Backdate is how far before its issue a certificate lasting validity
// starts: an hour (clocks of devices differ by seconds to minutes), but
// at most a tenth of its life, so that short test certificates keep
// their renewal point after their issue.
func Backdate(validity time.Duration) time.Duration {
	return min(time.Hour, validity/10)
}

// RenewAt is when a certificate valid from notBefore to notAfter is due
// for renewal: at two thirds of its life, moved by jitter (in [0, 1))
// within plus or minus a twenty-fourth of it, so that a fleet issued
// together does not renew together. A year's certificate renews about
// four months before it expires, with room for weeks of failed attempts.
func RenewAt(notBefore, notAfter time.Time, jitter float64) time.Time {
	life := notAfter.Sub(notBefore)
	at := time.Duration(float64(life) * (2.0/3 + (jitter-0.5)/12))
	return notBefore.Add(at)
}

// sign signs tmpl for pub with the CA's key, valid from slightly before
// now (Backdate: small clock skew) for validity, but never past the CA
// itself.
func (a *Authority) sign(tmpl *x509.Certificate, validity time.Duration, pub crypto.PublicKey) ([]byte, error) {
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-Backdate(validity))
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(a.Cert.NotAfter) {
		tmpl.NotAfter = a.Cert.NotAfter
	}
	// Nor past a certificate of its chain: a verifier that reaches the
	// CA through a cross-certificate needs it valid too.
	chain, err := ParseCertificates(a.Chain)
	if err != nil {
		return nil, fmt.Errorf("pki: the CA's chain: %w", err)
	}
	for _, c := range chain {
		if tmpl.NotAfter.After(c.NotAfter) {
			tmpl.NotAfter = c.NotAfter
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, pub, a.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: create certificate: %w", err)
	}
	return append(encodeCert(der), a.Chain...), nil
}

// CheckIssued checks that certPEM is a certificate for key's public half,
// with commonName, chained (through the certificates that follow it in
// certPEM, a CA rotation's cross-certificates) to a CA of caPEM: what a
// joiner checks of the certificate it was handed before it keeps it, and
// a replica of its renewal.
func CheckIssued(certPEM, caPEM []byte, key crypto.Signer, commonName string) error {
	cert, err := parseCert(certPEM)
	if err != nil {
		return err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return errors.New("pki: the certificate is not for this key")
	}
	if cert.Subject.CommonName != commonName {
		return fmt.Errorf("pki: the certificate is for %q, not %q", cert.Subject.CommonName, commonName)
	}
	if err := VerifyChain(certPEM, caPEM); err != nil {
		return fmt.Errorf("pki: the certificate is not signed by the CA: %w", err)
	}
	return nil
}

func splitHosts(hosts []string) (dns []string, ips []net.IP) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			dns = append(dns, h)
		}
	}
	return dns, ips
}

// Resign is a renewal of old: a new certificate for old's key, with its
// common name, groups, names and usages, lasting validity. The caller has
// checked that old is one the cluster issued and that the requester holds
// its key (a certificate request signed by it).
func (a *Authority) Resign(old *x509.Certificate, validity time.Duration) ([]byte, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: old.Subject.CommonName, Organization: old.Subject.Organization},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: old.ExtKeyUsage,
		DNSNames:    old.DNSNames,
		IPAddresses: old.IPAddresses,
	}
	return a.sign(tmpl, validity, old.PublicKey)
}

// ParseCertificate reads the first PEM certificate of certPEM.
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) { return parseCert(certPEM) }
