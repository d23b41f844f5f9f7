package cluster

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// A device back after a long time off.
//
// A member's or replica's certificate lasts --cluster-cert-validity and
// renews at two thirds of it; a device off for longer than its validity
// starts with a certificate every member's TLS refuses. It renews it
// before anything uses it, through a member's renewal endpoint
// (clusterapi.RenewPath), when three things hold: the cluster's record
// still holds the expired certificate (the device was not removed or
// revoked meanwhile), the request is signed by that certificate's key,
// and it proves the current cluster token, as a join does (a nonce, and
// an HMAC under the token over the TLS session, the request and the
// nonce). The key alone is not enough: it could be a copy taken off a
// device the operator stopped trusting but forgot to remove; the token is
// what admits a device. A member whose token file predates a rotate-token
// (or a removal, which rotates it) is refused, saying to start it with
// the current token (--cluster-token-file, which then replaces its file).
//
// The answer is trusted because it must be a certificate of the CA the
// device holds, for its own key and name (pki.CheckIssued): a member that
// does not know the token can do nothing with the request, and one that
// is not of this cluster cannot answer it.

// renewExpiredTimeout bounds how long a device tries the members it knows
// (down, or without a leader for a moment) before it gives up and says
// why.
const renewExpiredTimeout = joinTimeout

// errRenewAnswer marks an answer that asking again will not change.
var errRenewAnswer = errors.New("unusable answer")

// certFiles are a device's certificate, key and CA files.
type certFiles struct{ cert, key, ca string }

// renewIfExpired renews the certificate in files through one of the
// members serving the API at urls, with token, when it expired; it does
// nothing when it has not. kind and name say whose it is in the log and
// errors; advice is what the operator does when the cluster refuses it.
func renewIfExpired(ctx context.Context, kind, name string, files certFiles, token []byte, urls []string, log *slog.Logger) error {
	cert, _, err := readCert(files.cert)
	if err != nil {
		return err
	}
	if !time.Now().After(cert.NotAfter) {
		return nil
	}
	expired := fmt.Sprintf("the %s's certificate %s expired at %s while the device was off (valid from %s)", kind, files.cert,
		cert.NotAfter.UTC().Format(time.RFC3339), cert.NotBefore.UTC().Format(time.RFC3339))
	if len(token) == 0 {
		return fmt.Errorf("%s; renewing it needs the cluster's current token: start it once with --cluster-token-file FILE "+
			"(a running member's cluster/token)", expired)
	}
	if len(urls) == 0 {
		return fmt.Errorf("%s; renewing it goes through a running member, and this device knows none: "+
			"start it once with --join URL (any running member's API URL)", expired)
	}
	log.Warn("The certificate expired while the device was off: renewing it through a member with the cluster token before starting",
		"kind", kind, "name", name, "expired", cert.NotAfter.UTC().Format(time.RFC3339), "via", urls)
	keyPEM, err := os.ReadFile(files.key)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	caPEM, err := os.ReadFile(files.ca)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("cluster: the %s's key: %w", kind, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return fmt.Errorf("cluster: the %s's key cannot sign", kind)
	}
	ctx, cancel := context.WithTimeout(ctx, renewExpiredTimeout)
	defer cancel()
	start := time.Now()
	for attempt := 0; ; attempt++ {
		var last error
		retry := false
		for _, u := range urls {
			renewed, err := renewExpiredVia(ctx, u, token, certPEM, key, caPEM, cert.Subject.CommonName)
			if err == nil {
				if err := WriteFile(files.cert, renewed, 0o644); err != nil {
					return err
				}
				if c, err := pki.ParseCertificate(renewed); err == nil {
					log.Info("Renewed the expired certificate; starting", "kind", kind, "name", name, "via", u,
						"not_after", c.NotAfter.UTC().Format(time.RFC3339), "took", time.Since(start).Round(time.Millisecond).String())
				}
				return nil
			}
			var re *RefusedError
			if errors.As(err, &re) && re.Code == http.StatusForbidden {
				// The cluster's answer, the same from every member.
				return fmt.Errorf("%s, and the cluster refused to renew it: %w", expired, err)
			}
			last = err
			retry = retry || (Retryable(err) && !errors.Is(err, errRenewAnswer))
		}
		if !retry {
			return fmt.Errorf("%s, and renewing it failed: %w", expired, last)
		}
		if attempt%5 == 0 {
			log.Info("Renewing the expired certificate; retrying", "kind", kind, "name", name, "err", last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s, and no member renewed it within %s: %w", expired, renewExpiredTimeout, last)
		case <-time.After(time.Second):
		}
	}
}

// renewExpiredVia runs the renewal handshake with the member serving the
// API at apiURL on one connection: a nonce, then the request with the
// proof of the token over that nonce and session. It returns the renewed
// certificate, checked against caPEM, key and name.
func renewExpiredVia(ctx context.Context, apiURL string, token, certPEM []byte, key crypto.Signer, caPEM []byte, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ex, err := dialExchange(ctx, "renew", apiURL)
	if err != nil {
		return nil, err
	}
	defer ex.conn.Close()
	var challenge clusterapi.NonceResponse
	if err := ex.post(clusterapi.JoinNoncePath, nil, false, &challenge); err != nil {
		return nil, err
	}
	csr, err := pki.CreateCSR(key, name, nil)
	if err != nil {
		return nil, err
	}
	req := clusterapi.RenewRequest{Cert: string(certPEM), CSR: string(csr), Nonce: challenge.Nonce}
	req.Proof = clusterapi.RenewProof(token, ex.ekm, &req)
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out clusterapi.RenewResponse
	if err := ex.post(clusterapi.RenewPath, body, true, &out); err != nil {
		return nil, err
	}
	if out.Cert == "" {
		return nil, fmt.Errorf("renew %s: %w: the member finds the certificate unexpired (renewal due at %s): is this device's clock ahead?",
			apiURL, errRenewAnswer, out.RenewAt.UTC().Format(time.RFC3339))
	}
	if err := pki.CheckIssued([]byte(out.Cert), caPEM, key, name); err != nil {
		return nil, fmt.Errorf("renew %s: %w: the member's certificate: %w", apiURL, errRenewAnswer, err)
	}
	return []byte(out.Cert), nil
}

// renewURLs are the members' API URLs a device renews through: --join
// when this start gives it, the one it joined through, then the others
// it knows, each once.
func renewURLs(join, joinedVia string, others ...string) []string {
	var urls []string
	for _, u := range append([]string{join, joinedVia}, others...) {
		if u != "" && !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	return urls
}
