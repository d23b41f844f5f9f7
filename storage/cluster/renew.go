package cluster

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// Certificate renewal.
//
// Members' and replicas' certificates last --cluster-cert-validity (a
// year by default) and their holders renew them at about two thirds of
// their life (pki.RenewAt, with a jitter taken from the certificate's
// fingerprint, so that a restart does not move it). A renewal keeps the
// key: the CA signs the same public key again with the same names. That
// makes it a file swap for every TLS end that reads the certificate per
// handshake (etcd's listeners and dialers, through transport.TLSInfo's
// GetCertificate/GetClientCertificate; the peer gate; storage/etcd's
// client): only the certificate file changes, atomically, and the key
// file a handshake reads with it is the same, so no handshake ever sees
// a certificate and a key that do not match. Open connections keep the
// certificate they started with, which stays admitted: the record keeps
// each device's two newest certificates (renewKeep), and drops older
// ones, whose connections are then closed and re-dialled with the newest.
//
// A member signs its own renewal with the CA key it holds, records it,
// waits renewSettle for the other members to apply the record (their peer
// gates check a peer's certificate against their copy), then swaps the
// file. A replica asks a member (clusterapi.RenewPath) with its
// certificate and a request signed by its key.
//
// rotate-certs writes rotateKey: every member renews at once (it follows
// the record), every replica at its next check (renewCheckEvery).

// rotateKey holds the last rotate-certs' time (RFC 3339).
const rotateKey = trustPrefix + "rotate-certs"

// renewKeep is how many certificates of one device the record keeps: the
// newest, and the one its open connections may still use.
const renewKeep = 2

// renewSettle is how long a member waits between recording its renewed
// certificate and using it: the other members' peer gates admit it once
// they applied the record (milliseconds on a healthy cluster).
const renewSettle = 2 * time.Second

// jitterOf is a number in [0, 1) fixed by the certificate.
func jitterOf(fp string) float64 {
	n, _ := strconv.ParseUint(fp[:4], 16, 16)
	return float64(n) / 65536
}

// renewalDue reports whether cert (whose credential is cred, possibly
// empty) must renew now, and when it will otherwise: at its renewal
// point, or at once when a rotation asked after it was issued.
func renewalDue(cert *x509.Certificate, fp string, cred Credential, rotateAt, now time.Time) (bool, time.Time) {
	at := pki.RenewAt(cert.NotBefore, cert.NotAfter, jitterOf(fp))
	issued := cred.Issued
	if issued.IsZero() {
		issued = cert.NotBefore
	}
	if !rotateAt.IsZero() && issued.Before(rotateAt) {
		at = now
	}
	return !now.Before(at), at
}

// warnWithin is how close to its expiry a certificate is warned about: 30
// days, or a quarter of its life when shorter (its holder renews at about
// two thirds: a quarter left means renewals failed for a while).
func warnWithin(notBefore, notAfter time.Time) time.Duration {
	return min(30*24*time.Hour, notAfter.Sub(notBefore)/4)
}

// renewCheckMax bounds how long the renewal loops sleep: a wall clock
// that was set after they started (a device that booted in 1970) is
// taken into account within it.
const renewCheckMax = time.Hour

// renewCheckEvery is how often a replica asks whether a rotation wants it
// to renew: a minute, or a twentieth of a short certificate's life.
func renewCheckEvery(cert *x509.Certificate) time.Duration {
	return max(time.Second, min(time.Minute, cert.NotAfter.Sub(cert.NotBefore)/20))
}

// renewBackoff is the wait after a failed renewal: a twentieth of the
// certificate's life, between a second and ten minutes.
func renewBackoff(cert *x509.Certificate) time.Duration {
	return max(time.Second, min(10*time.Minute, cert.NotAfter.Sub(cert.NotBefore)/20))
}

// readCert reads the PEM certificate in file with its fingerprint.
func readCert(file string) (*x509.Certificate, string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("cluster: %w", err)
	}
	fp, cert, err := pemFingerprint(data)
	if err != nil {
		return nil, "", fmt.Errorf("cluster: %s: %w", file, err)
	}
	return cert, fp, nil
}

// renewMember is the member's renewal loop (one of its background
// goroutines). It also brings the member's CA files up to a CA rotation
// (carotate.go) whenever the record changes.
func (m *Member) renewMember() {
	var retry time.Duration
	for {
		wait := renewCheckMax
		cert, fp, err := readCert(m.cfg.Paths.CertFile)
		if err == nil {
			m.gate.mu.RLock()
			cred, rotateAt := m.gate.creds[fp], m.gate.rotateAt
			m.gate.mu.RUnlock()
			_, at := renewalDue(cert, fp, cred, rotateAt, time.Now())
			if m.gate.reissueDue(pki.IssuerID(cert)) {
				at = time.Now()
			}
			wait = min(wait, max(0, time.Until(at)))
		}
		if retry > 0 {
			wait = min(wait, retry)
		}
		select {
		case <-m.done:
			return
		case <-m.renewNow:
		case <-time.After(wait):
		}
		select { // a closing member does not start a renewal
		case <-m.done:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), removeTimeout+renewSettle)
		err = m.followCA(ctx)
		if err == nil {
			err = m.renewOwn(ctx)
		}
		cancel()
		if err != nil {
			retry = time.Minute
			if cert != nil {
				retry = renewBackoff(cert)
			}
			m.log.Warn("Could not renew the member's certificate; retrying", "member", m.cfg.Name, "retry_in", retry.String(), "err", err)
			continue
		}
		retry = 0
	}
}

// renewOwn renews the member's certificate when it is due.
func (m *Member) renewOwn(ctx context.Context) error {
	cert, fp, err := readCert(m.cfg.Paths.CertFile)
	if err != nil {
		return err
	}
	m.gate.mu.RLock()
	cred, rotateAt := m.gate.creds[fp], m.gate.rotateAt
	m.gate.mu.RUnlock()
	if due, _ := renewalDue(cert, fp, cred, rotateAt, time.Now()); !due && !m.gate.reissueDue(pki.IssuerID(cert)) {
		return nil
	}
	certPEM, err := m.reissue(ctx, cert, KindMember, m.cfg.Name)
	if err != nil {
		return err
	}
	select { // the other members' peer gates apply the record
	case <-time.After(renewSettle):
	case <-m.done:
		return errors.New("the member is closing")
	}
	if err := WriteFile(m.cfg.Paths.CertFile, certPEM, 0o644); err != nil {
		return err
	}
	if renewed, err := pki.ParseCertificate(certPEM); err == nil {
		m.log.Info("Renewed the member's certificate", "member", m.cfg.Name, "not_after", renewed.NotAfter.UTC().Format(time.RFC3339), "ca", pki.IssuerID(renewed))
	}
	return nil
}

// reissue signs a renewal of old for kind name with the CA, records it,
// and drops the device's certificates beyond the renewKeep newest, old
// excepted: old is the one the device holds until it has the answer.
func (m *Member) reissue(ctx context.Context, old *x509.Certificate, kind, name string) ([]byte, error) {
	// A CA rotation the record holds is applied first: nothing is signed
	// with a CA the rotation replaces.
	if err := m.syncCA(); err != nil {
		return nil, err
	}
	ca, err := loadCA(m.cfg.Paths)
	if err != nil {
		return nil, err
	}
	validity := m.cfg.CertValidity
	if validity <= 0 {
		validity = pki.DefaultCertValidity
	}
	certPEM, err := ca.Resign(old, validity)
	if err != nil {
		return nil, err
	}
	if _, err := recordCredential(clientv3.WithRequireLeader(ctx), m.client, certPEM, kind, name); err != nil {
		return nil, err
	}
	oldFP := Fingerprint(old.Raw)
	if err := pruneCredentials(clientv3.WithRequireLeader(ctx), m.client, kind, name, oldFP); err != nil {
		m.log.Warn("Could not drop the older certificates of a renewed device", "kind", kind, "name", name, "err", err)
	}
	return certPEM, nil
}

// pruneCredentials deletes the credentials of kind name beyond its
// renewKeep newest, in one write, but never the one whose fingerprint is
// renewing: the device renews it again when it did not get (or could not
// store) the answer, a member stopped between recording its renewal and
// writing it, a replica whose answer was lost, and each such renewal
// records one more. Without the exception two of them drop the very
// certificate the device holds, and it is locked out.
func pruneCredentials(ctx context.Context, c *clientv3.Client, kind, name, renewing string) error {
	resp, err := c.Get(ctx, credentialsPrefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	type entry struct {
		key  string
		cred Credential
	}
	var mine []entry
	for _, kv := range resp.Kvs {
		var cred Credential
		if json.Unmarshal(kv.Value, &cred) == nil && cred.Kind == kind && cred.Name == name {
			mine = append(mine, entry{string(kv.Key), cred})
		}
	}
	if len(mine) <= renewKeep {
		return nil
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].cred.Issued.After(mine[j].cred.Issued) })
	var ops []clientv3.Op
	for _, e := range mine[renewKeep:] {
		if e.key != credentialsPrefix+renewing {
			ops = append(ops, clientv3.OpDelete(e.key))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	_, err = c.Txn(ctx).Then(ops...).Commit()
	return err
}

// Renew answers a replica's (or a member's) renewal request: the
// certificate must be one the record holds, chained to the CA, and the
// request signed by its key. It returns the renewal, or when the
// certificate is not due, when it is.
//
// A certificate that expired (a device off for longer than its life)
// renews only with a proof of the current cluster token too (rejoin.go):
// the caller (web) has consumed req.Nonce and set req.Session. Its
// refusals say what to do: a removed device joins again; a device whose
// token file is older than a rotate-token starts with the current token.
func (s *Membership) Renew(ctx context.Context, req clusterapi.RenewRequest) (clusterapi.RenewResponse, error) {
	var out clusterapi.RenewResponse
	if len(req.Cert) > clusterapi.MaxCSRBytes || len(req.CSR) > clusterapi.MaxCSRBytes {
		return out, fmt.Errorf("%w: cert or csr too large", clusterapi.ErrInvalidRequest)
	}
	if err := req.ValidateProof(); err != nil {
		return out, err
	}
	fp, cert, err := pemFingerprint([]byte(req.Cert))
	if err != nil {
		return out, fmt.Errorf("%w: cert: %w", clusterapi.ErrInvalidRequest, err)
	}
	csr, err := pki.ParseCSR([]byte(req.CSR))
	if err != nil {
		return out, fmt.Errorf("%w: csr: %w", clusterapi.ErrInvalidRequest, err)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(csr.PublicKey) {
		return out, fmt.Errorf("%w: the request is not signed by the certificate's key", clusterapi.ErrNotAdmitted)
	}
	if err := s.m.syncCA(); err != nil { // a CA rotation's trust first
		return out, fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	caPEM, err := os.ReadFile(s.p.paths.CAFile)
	if err != nil {
		return out, fmt.Errorf("cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	// After a CA rotation, a device that never got its renewal's answer
	// still holds a certificate of the old CA, which the record admits
	// until its next renewal: it renews with it.
	if rec := s.m.gate.caRecordNow(); rec != nil && rec.Phase == clusterapi.CAPhaseDone {
		pool.AppendCertsFromPEM([]byte(rec.Old))
	}
	now := time.Now()
	expired := now.After(cert.NotAfter)
	verify := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if expired {
		// The chain is checked as of the certificate's last valid
		// instant: what it proves then is that this CA issued it.
		verify.CurrentTime = cert.NotAfter
	}
	if _, err := cert.Verify(verify); err != nil {
		return out, fmt.Errorf("%w: %w", clusterapi.ErrNotAdmitted, err)
	}
	rctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	// One linearizable read of the credential and the last rotation: a
	// renewal right after a rotate-certs sees it, whatever this member's
	// mirror of the record has applied yet.
	resp, err := s.m.client.Txn(clientv3.WithRequireLeader(rctx)).Then(clientv3.OpGet(credentialsPrefix+fp), clientv3.OpGet(rotateKey)).Commit()
	if err != nil {
		return out, fmt.Errorf("%w: read the record: %w", clusterapi.ErrTryAgain, err)
	}
	var cred Credential
	credKVs, rotateKVs := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(credKVs) == 0 || json.Unmarshal(credKVs[0].Value, &cred) != nil {
		why := "its device was removed or revoked, or it was replaced by two renewals since"
		if expired {
			why = "its device was removed or revoked while it was off: it must join again, from an empty data directory (docs/cluster.md, \"Certificate rotation\")"
		}
		return out, fmt.Errorf("%w: the cluster does not admit this certificate (%s)", clusterapi.ErrNotAdmitted, why)
	}
	if expired {
		if err := s.checkRenewProof(&req, cert); err != nil {
			return out, err
		}
	} else {
		var rotateAt time.Time
		if len(rotateKVs) > 0 {
			rotateAt, _ = time.Parse(time.RFC3339Nano, string(rotateKVs[0].Value))
		}
		// The trust file goes with every answer: a replica follows a CA
		// rotation's trust with it (carotate.go).
		if due, at := renewalDue(cert, fp, cred, rotateAt, now); !due && !s.m.gate.reissueDue(pki.IssuerID(cert)) {
			return clusterapi.RenewResponse{RenewAt: at.UTC(), CACert: string(caPEM)}, nil
		}
	}
	certPEM, err := s.m.reissue(rctx, cert, cred.Kind, cred.Name)
	if err != nil {
		return out, fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	if expired {
		s.m.log.Info("Renewed an expired certificate: its device proved its key and the cluster token", "kind", cred.Kind, "name", cred.Name,
			"expired", cert.NotAfter.UTC().Format(time.RFC3339))
	} else {
		s.m.log.Info("Renewed a certificate", "kind", cred.Kind, "name", cred.Name)
	}
	// The trust file as it is now: reissue may have just brought it up to
	// a rotation.
	if now, err := os.ReadFile(s.p.paths.CAFile); err == nil {
		caPEM = now
	}
	return clusterapi.RenewResponse{Cert: string(certPEM), CACert: string(caPEM)}, nil
}

// checkRenewProof checks the proof of the current cluster token that an
// expired certificate's renewal needs.
func (s *Membership) checkRenewProof(req *clusterapi.RenewRequest, cert *x509.Certificate) error {
	expiredAt := cert.NotAfter.UTC().Format(time.RFC3339)
	if req.Proof == "" {
		return fmt.Errorf("%w: the certificate expired at %s; renewing an expired certificate needs a proof of the current cluster token "+
			"(leasehold sends one when it starts with a certificate that expired: upgrade the device)", clusterapi.ErrNotAdmitted, expiredAt)
	}
	if !hmac.Equal([]byte(req.Proof), []byte(clusterapi.RenewProof(s.Token(), req.Session, req))) {
		return fmt.Errorf("%w: the certificate expired at %s, and the cluster token the device proved is not the cluster's current one "+
			"(rotated while it was off, by rotate-token or a removal): start it with --cluster-token-file FILE holding the current token "+
			"(a running member's cluster/token)", clusterapi.ErrNotAdmitted, expiredAt)
	}
	return nil
}

// RotateCerts asks every member and replica to renew its certificate
// now: the members at once, the replicas at their next check.
func (s *Membership) RotateCerts(ctx context.Context) (clusterapi.RotateCertsResponse, error) {
	at := time.Now().UTC()
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	if _, err := s.m.client.Put(clientv3.WithRequireLeader(ctx), rotateKey, at.Format(time.RFC3339Nano)); err != nil {
		return clusterapi.RotateCertsResponse{}, fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	s.m.log.Info("Certificate rotation asked: every member and replica renews its certificate")
	return clusterapi.RotateCertsResponse{RequestedAt: at}, nil
}

// RotateToken replaces the cluster token: every member writes the new one
// to its token file; a device holding the old one can no longer join.
func (s *Membership) RotateToken(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	if _, err := s.m.client.Put(clientv3.WithRequireLeader(ctx), tokenKey, newToken()); err != nil {
		return fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	s.m.log.Info("The cluster token was rotated")
	return nil
}

// Certificates lists the newest certificate of every member and replica
// as this member applied the record.
func (s *Membership) Certificates() []clusterapi.Certificate {
	g := s.m.gate
	g.mu.RLock()
	newest := map[[2]string]struct {
		fp   string
		cred Credential
	}{}
	for fp, c := range g.creds {
		k := [2]string{c.Kind, c.Name}
		if cur, ok := newest[k]; !ok || c.Issued.After(cur.cred.Issued) {
			newest[k] = struct {
				fp   string
				cred Credential
			}{fp, c}
		}
	}
	rotateAt := g.rotateAt
	g.mu.RUnlock()
	now := time.Now()
	out := make([]clusterapi.Certificate, 0, len(newest))
	for _, n := range newest {
		c := clusterapi.Certificate{Kind: n.cred.Kind, Name: n.cred.Name, Serial: n.cred.Serial, Issued: n.cred.Issued, NotAfter: n.cred.NotAfter, CA: n.cred.CA}
		if !c.NotAfter.IsZero() {
			c.ExpiresInSeconds = int64(c.NotAfter.Sub(now) / time.Second)
			// The credential does not hold NotBefore: the issue time is
			// within pki.Backdate of it.
			life := c.NotAfter.Sub(c.Issued)
			notBefore := c.Issued.Add(-pki.Backdate(life))
			c.RenewAt = pki.RenewAt(notBefore, c.NotAfter, jitterOf(n.fp)).UTC()
			if !rotateAt.IsZero() && c.Issued.Before(rotateAt) {
				c.RenewAt = rotateAt
			}
			if left := c.NotAfter.Sub(now); left < warnWithin(notBefore, c.NotAfter) {
				c.Warning = fmt.Sprintf("expires in %s: its holder has not renewed it (off, or renewals fail: see its log)", left.Round(time.Second))
				if left <= 0 {
					c.Warning = "expired: its device renews it with the cluster token when it starts again (docs/cluster.md)"
				}
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// CertificatesNote is /readyz's warning (not a failure) while a member's
// or replica's certificate nears its expiry; "" otherwise.
func (s *Membership) CertificatesNote() string {
	for _, c := range s.Certificates() {
		if c.Warning != "" {
			return "a cluster certificate nears its expiry (leasehold cluster status names it)"
		}
	}
	return ""
}
