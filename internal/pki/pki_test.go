package pki

import (
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

// TestClientValidity: an ordinary client certificate lasts a year (its
// holders renew it); a long-lived one, which nothing renews, as long as
// the CA; both are client certificates only, chained to the CA.
func TestClientValidity(t *testing.T) {
	ca, err := NewAuthority("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, tc := range []struct {
		name  string
		issue func(string, []string) ([]byte, []byte, error)
		want  time.Time
	}{
		{"IssueClient", ca.IssueClient, time.Now().Add(ServingValidity)},
		{"IssueLongLivedClient", ca.IssueLongLivedClient, ca.Cert.NotAfter},
	} {
		certPEM, _, err := tc.issue("replica-1", []string{"g"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cert, err := parseCert(certPEM)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d := cert.NotAfter.Sub(tc.want); d < -time.Minute || d > time.Minute {
			t.Errorf("%s: valid until %v, want about %v", tc.name, cert.NotAfter, tc.want)
		}
		if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || cert.Subject.CommonName != "replica-1" {
			t.Errorf("%s: usages %v, subject %v", tc.name, cert.ExtKeyUsage, cert.Subject)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: does not chain to the CA: %v", tc.name, err)
		}
	}
}
