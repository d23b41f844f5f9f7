package web

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"
)

// TestPresentedCertificates: /metrics reports the expiry of the serving
// certificate and of the chain sent with it, for the certificate alerts.
func TestPresentedCertificates(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := time.Unix(2000000000, 0)
	mk := func(serial int64, cn string) []byte {
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Unix(1000000000, 0), NotAfter: notAfter,
		}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}}, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{mk(0x2a, "device-1"), mk(1, "ca")}, PrivateKey: key}}}
	got := presentedCertificates(cfg)
	if len(got) != 2 {
		t.Fatalf("presentedCertificates = %+v, want the serving certificate and its chain", got)
	}
	if got[0].Use != "serving" || got[0].Subject != "device-1" || got[0].Serial != "2a" || !got[0].NotAfter.Equal(notAfter) {
		t.Errorf("serving certificate = %+v, want use serving, subject device-1, serial 2a, NotAfter %v", got[0], notAfter)
	}
	if got[1].Use != "serving-chain" || got[1].Subject != "ca" {
		t.Errorf("chain certificate = %+v, want use serving-chain, subject ca", got[1])
	}
	if presentedCertificates(nil) != nil {
		t.Error("a server without TLS reports certificates")
	}
}
