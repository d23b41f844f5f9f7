package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the generated files in a pki directory.
type Files struct {
	CAFile, CertFile, KeyFile string
	// CAPEM is the CA certificate, for kubeconfigs.
	CAPEM []byte
	// Generated lists what this call created ("ca", "serving").
	Generated []string
}

// Ensure makes dir hold a CA and a serving certificate valid for hosts,
// and returns their paths. An existing CA is always reused (kubeconfigs
// written earlier keep working); the serving certificate is reused unless
// it misses one of hosts, was not signed by the CA, or expires within 30
// days.
func Ensure(dir string, hosts []string) (Files, error) {
	f := Files{
		CAFile:   filepath.Join(dir, "ca.crt"),
		CertFile: filepath.Join(dir, "serving.crt"),
		KeyFile:  filepath.Join(dir, "serving.key"),
	}
	caKey := filepath.Join(dir, "ca.key")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("pki: %w", err)
	}
	ca, err := loadAuthority(f.CAFile, caKey)
	if errors.Is(err, fs.ErrNotExist) {
		if ca, err = NewAuthority("leasehold-ca@" + time.Now().UTC().Format("20060102T150405Z")); err != nil {
			return f, err
		}
		if err := writeFile(caKey, ca.KeyPEM, 0o600); err != nil {
			return f, err
		}
		if err := writeFile(f.CAFile, ca.CertPEM, 0o644); err != nil {
			return f, err
		}
		f.Generated = append(f.Generated, "ca")
	} else if err != nil {
		return f, err
	}
	f.CAPEM = ca.CertPEM
	if servingUsable(ca, f.CertFile, f.KeyFile, hosts) {
		return f, nil
	}
	certPEM, keyPEM, err := ca.IssueServing("leasehold", hosts)
	if err != nil {
		return f, err
	}
	if err := writeFile(f.KeyFile, keyPEM, 0o600); err != nil {
		return f, err
	}
	if err := writeFile(f.CertFile, certPEM, 0o644); err != nil {
		return f, err
	}
	f.Generated = append(f.Generated, "serving")
	return f, nil
}

func loadAuthority(certFile, keyFile string) (*Authority, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: %s exists but its key does not: %w", certFile, err)
	}
	ca, err := ParseAuthority(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", certFile, err)
	}
	return ca, nil
}

func servingUsable(ca *Authority, certFile, keyFile string, hosts []string) bool {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return false
	}
	if _, err := os.Stat(keyFile); err != nil {
		return false
	}
	cert, err := parseCert(certPEM)
	if err != nil || time.Until(cert.NotAfter) < renewBefore {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return false
	}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if net.ParseIP(h) == nil && cert.VerifyHostname(h) != nil {
			return false
		}
		if ip := net.ParseIP(h); ip != nil && !hasIP(cert, ip) {
			return false
		}
	}
	return true
}

func hasIP(cert *x509.Certificate, ip net.IP) bool {
	for _, c := range cert.IPAddresses {
		if c.Equal(ip) {
			return true
		}
	}
	return false
}

// writeFile writes atomically with mode perm.
func writeFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".pki-*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}
