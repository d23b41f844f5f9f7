package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// LoadCertPool reads a PEM bundle of CA certificates (--client-ca-file).
func LoadCertPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("client CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// errInvalidCert is why a presented certificate does not authenticate.
var errInvalidCert = errors.New("client certificate not verified")

// verifyClientCert is kube-apiserver's x509 authenticator: the chain must
// lead to a client CA and allow client authentication; the user is the
// subject's CommonName and the groups its Organizations.
func verifyClientCert(pool *x509.CertPool, chain []*x509.Certificate) (User, error) {
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return User{}, fmt.Errorf("%w: %w", errInvalidCert, err)
	}
	if leaf.Subject.CommonName == "" {
		return User{}, fmt.Errorf("%w: empty common name", errInvalidCert)
	}
	return User{Name: leaf.Subject.CommonName, Groups: append([]string(nil), leaf.Subject.Organization...)}, nil
}
