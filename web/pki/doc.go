// Package pki generates the certificates leasehold serves with when no
// --tls-cert-file is given (--tls-auto): a private CA and a serving
// certificate signed by it, stored in <data-dir>/pki/ and reused across
// restarts, in the spirit of k3s' zero-configuration TLS. The CA goes into
// the written kubeconfig as certificate-authority-data, so kubectl and
// client-go verify the server without any extra step.
//
// Keys are ECDSA P-256 in PKCS#8 PEM files with mode 0600.
package pki
