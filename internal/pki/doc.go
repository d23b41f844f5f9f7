// Package pki generates the certificates leasehold serves with when no
// --tls-cert-file is given (--tls-auto): a private CA and a serving
// certificate signed by it, stored in <data-dir>/pki/ and reused across
// restarts, in the spirit of k3s' zero-configuration TLS. The CA goes into
// the written kubeconfig as certificate-authority-data, so kubectl and
// client-go verify the server without any extra step.
//
// Keys are ECDSA P-256 in PKCS#8 PEM files with mode 0600.
//
// The embedded etcd cluster's CA (storage/cluster) is an Authority too: it
// issues the members' peer certificates and the replicas' client ones. So
// that both the web server and storage can use it, it is a leaf outside
// the four layers: the standard library only.
package pki
