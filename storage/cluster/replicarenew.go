package cluster

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// RenewReplica keeps the replica's client certificate renewed until ctx
// ends (renew.go says how): every renewCheckEvery it asks the member it
// joined through, which renews it when it is due (two thirds of its life,
// or after a rotate-certs) and otherwise says when it will be. The new
// certificate is for the same key and replaces the file atomically;
// storage/etcd's client presents it from its next connection on.
//
// The member's TLS certificate is not verified (it is the API's, not the
// cluster CA's): the answer is, since it must be a certificate of the
// cluster CA the replica holds, for its own key and name.
func RenewReplica(ctx context.Context, r Replica, log *slog.Logger) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	defer hc.CloseIdleConnections()
	for {
		wait := time.Minute
		cert, _, err := readCert(r.Files.CertFile)
		if err == nil {
			wait = renewCheckEvery(cert)
			err = renewReplicaOnce(ctx, hc, r, cert, log)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("Could not renew the replica's certificate; retrying", "replica", r.Name, "via", r.JoinedVia, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// renewReplicaOnce asks the member once, and keeps a renewal it gets.
func renewReplicaOnce(ctx context.Context, hc *http.Client, r Replica, cert *x509.Certificate, log *slog.Logger) error {
	if r.JoinedVia == "" {
		return errors.New("the replica's state names no member to renew through (joined by an older leasehold): join it again")
	}
	keyPEM, err := os.ReadFile(r.Files.KeyFile)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), keyPEM)
	if err != nil {
		return fmt.Errorf("cluster: the replica's key: %w", err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return errors.New("cluster: the replica's key cannot sign")
	}
	csr, err := pki.CreateCSR(key, cert.Subject.CommonName, nil)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(clusterapi.RenewRequest{Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})), CSR: string(csr)})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.JoinedVia, "/")+clusterapi.RenewPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &RefusedError{Op: "renew", URL: r.JoinedVia, Code: resp.StatusCode, Message: strings.TrimSpace(string(data))}
	}
	var out clusterapi.RenewResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Errorf("renew via %s: %w", r.JoinedVia, err)
	}
	caPEM, err := os.ReadFile(r.Files.CAFile)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if out.Cert != "" {
		// Chained to a CA the replica trusts: after a CA rotation, through
		// the cross-certificate that follows it.
		if err := pki.CheckIssued([]byte(out.Cert), caPEM, key, cert.Subject.CommonName); err != nil {
			return fmt.Errorf("renew via %s: the member's certificate: %w", r.JoinedVia, err)
		}
	}
	if err := followTrust(r, caPEM, []byte(out.CACert), []byte(out.Cert), log); err != nil {
		return fmt.Errorf("renew via %s: %w", r.JoinedVia, err)
	}
	if out.Cert == "" {
		return nil // not due yet
	}
	if err := WriteFile(r.Files.CertFile, []byte(out.Cert), 0o644); err != nil {
		return err
	}
	if renewed, err := pki.ParseCertificate([]byte(out.Cert)); err == nil {
		log.Info("Renewed the replica's certificate", "replica", r.Name, "not_after", renewed.NotAfter.UTC().Format(time.RFC3339), "ca", pki.IssuerID(renewed))
	}
	return nil
}

// followTrust replaces the replica's trust file (the CAs it verifies the
// members by) with the member's, bundle, when a CA it trusts vouches for
// every CA added (a CA rotation's cross-certificate, in chain): the new
// CA during a rotation, the old one dropped after it. The replica's etcd
// client keeps the trust it started with (the members' certificates
// carry the cross-certificate for it); the file is for its next start.
func followTrust(r Replica, trusted, bundle, chain []byte, log *slog.Logger) error {
	if len(bundle) == 0 || bytes.Equal(bundle, trusted) {
		return nil
	}
	if err := pki.AcceptTrust(bundle, trusted, chain); err != nil {
		return fmt.Errorf("the member's CA bundle: %w", err)
	}
	if err := WriteFile(r.Files.CAFile, bundle, 0o644); err != nil {
		return err
	}
	log.Info("The replica's trust follows the cluster's CA rotation", "replica", r.Name, "cas", strings.Count(string(bundle), "BEGIN CERTIFICATE"))
	return nil
}
