package security

import (
	"net"
	"path/filepath"
)

// CertFiles are the certificates serving on listen uses, whose NotBefore
// bounds how early the wall clock can truly read (internal/clockcheck):
// --tls-cert-file, or the --tls-auto CA and serving certificate of pkiDir
// (the names package pki gives them); none without TLS. tls reports
// whether the server speaks HTTPS there.
func (c *Config) CertFiles(listen, pkiDir string) (files []string, tls bool) {
	host, _, _ := net.SplitHostPort(listen)
	switch {
	case !c.TLSEnabled(host):
		return nil, false
	case c.TLSCertFile != "":
		return []string{c.TLSCertFile}, true
	}
	return []string{filepath.Join(pkiDir, "ca.crt"), filepath.Join(pkiDir, "serving.crt")}, true
}
