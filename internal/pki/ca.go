package pki

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// CA rotation (storage/cluster's carotate.go runs it).
//
// A new CA is cross-signed by the old one: the cross-certificate holds
// the new CA's name and key, issued by the old CA. Certificates the new
// CA issues carry it after them (Authority.Chain), so that a TLS end that
// trusts only the old CA (a process started before the rotation: embedded
// etcd reads its CA file once, at start) verifies them through it, and
// one that trusts the new CA verifies them directly. Nothing needs to
// reload its trust for the rotation to go on without a pause.

// CrossSign is a certificate of ca's name and key issued by a: by it, a
// verifier that trusts a accepts what ca issues. It lasts as long as
// both CAs.
func (a *Authority) CrossSign(ca *x509.Certificate) ([]byte, error) {
	if !ca.IsCA {
		return nil, errors.New("pki: cross-sign: not a CA certificate")
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               ca.Subject,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              ca.NotAfter,
		KeyUsage:              ca.KeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          ca.SubjectKeyId,
	}
	if tmpl.NotAfter.After(a.Cert.NotAfter) {
		tmpl.NotAfter = a.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, ca.PublicKey, a.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: cross-sign: %w", err)
	}
	return encodeCert(der), nil
}

// ParseCertificates reads every PEM certificate of data (none for empty
// data).
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			if len(bytes.TrimSpace(data)) != 0 {
				return nil, errors.New("pki: trailing data after the PEM certificates")
			}
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("pki: a PEM %s where certificates were expected", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		out = append(out, c)
	}
}

// KeyID names a CA: its subject key identifier, in hexadecimal, which a
// certificate it issued carries as its authority key identifier
// (IssuerID) and its cross-certificates share.
func KeyID(ca *x509.Certificate) string { return hex.EncodeToString(ca.SubjectKeyId) }

// IssuerID is the KeyID of the CA that issued cert.
func IssuerID(cert *x509.Certificate) string { return hex.EncodeToString(cert.AuthorityKeyId) }

// VerifyChain checks that the first certificate of certPEM chains to a
// CA of caPEM, through the certificates after it. Validity is checked as
// of the middle of the first certificate's life, not the device's clock
// (which may be wrong: a board without a battery boots in 1970): what is
// checked is who issued it.
func VerifyChain(certPEM, caPEM []byte) error {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return err
	}
	if len(certs) == 0 {
		return errors.New("pki: no certificate")
	}
	cas, err := ParseCertificates(caPEM)
	if err != nil {
		return fmt.Errorf("pki: CA: %w", err)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	leaf := certs[0]
	at := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// AcceptTrust decides whether a device that trusts the CAs of trustedPEM
// may trust those of bundlePEM instead (a member's answer, over a
// channel that proves nothing): each CA of the bundle must be trusted
// already, or be vouched for by a cross-certificate of chainPEM (its name
// and key) that a trusted CA issued. Dropping a CA is always accepted;
// adding one needs the old CA's word.
func AcceptTrust(bundlePEM, trustedPEM, chainPEM []byte) error {
	bundle, err := ParseCertificates(bundlePEM)
	if err != nil {
		return err
	}
	if len(bundle) == 0 {
		return errors.New("pki: an empty CA bundle")
	}
	trusted, err := ParseCertificates(trustedPEM)
	if err != nil {
		return fmt.Errorf("pki: trusted CAs: %w", err)
	}
	chain, err := ParseCertificates(chainPEM)
	if err != nil {
		return fmt.Errorf("pki: chain: %w", err)
	}
	for _, c := range bundle {
		if !c.IsCA || c.CheckSignatureFrom(c) != nil {
			return fmt.Errorf("pki: %q in the CA bundle is not a self-signed CA", c.Subject.CommonName)
		}
		if vouched(c, trusted, chain) {
			continue
		}
		return fmt.Errorf("pki: the CA %q is not vouched for by a CA this device trusts", c.Subject.CommonName)
	}
	return nil
}

func vouched(c *x509.Certificate, trusted, chain []*x509.Certificate) bool {
	for _, t := range trusted {
		if bytes.Equal(t.Raw, c.Raw) {
			return true
		}
	}
	pub, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return false
	}
	for _, x := range chain {
		if !x.IsCA || !bytes.Equal(x.RawSubject, c.RawSubject) || !pub.Equal(x.PublicKey) {
			continue
		}
		for _, t := range trusted {
			if x.CheckSignatureFrom(t) == nil {
				return true
			}
		}
	}
	return false
}

// ParseKey reads a PEM (PKCS #8) private key.
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("pki: the key holds no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("pki: the key cannot sign")
	}
	return signer, nil
}

// SealKey encrypts keyPEM (a new CA's key) so that only a holder of a's
// key opens it (OpenKey): AES-256-GCM under a key derived from a's
// private key. A CA rotation hands the new key to every member this way
// through the cluster's record: a copy of the record alone (a backup)
// does not reveal it, and once every member replaced the old key, nobody
// opens it.
func (a *Authority) SealKey(keyPEM []byte) (string, error) {
	aead, err := a.sealer()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	return base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, keyPEM, a.Cert.RawSubjectPublicKeyInfo)), nil
}

// OpenKey decrypts what SealKey sealed under a.
func (a *Authority) OpenKey(sealed string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return nil, fmt.Errorf("pki: sealed key: %w", err)
	}
	aead, err := a.sealer()
	if err != nil {
		return nil, err
	}
	if len(data) < aead.NonceSize() {
		return nil, errors.New("pki: sealed key too short")
	}
	out, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], a.Cert.RawSubjectPublicKeyInfo)
	if err != nil {
		return nil, errors.New("pki: the sealed key does not open with this CA's key")
	}
	return out, nil
}

func (a *Authority) sealer() (cipher.AEAD, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: seal: %w", err)
	}
	h := sha256.New()
	h.Write([]byte("leasehold cluster CA rotation\x00"))
	h.Write(der)
	block, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("pki: seal: %w", err)
	}
	return cipher.NewGCM(block)
}
