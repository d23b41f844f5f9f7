package cluster

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// CA rotation (rotate-ca).
//
// Why cross-signing. Embedded etcd builds its TLS configurations once,
// at start, from its CA file: transport.TLSInfo's ServerConfig and
// ClientConfig load TrustedCAFile into ClientCAs and RootCAs, and neither
// TLSInfo nor embed.Config takes a tls.Config, a GetConfigForClient or a
// VerifyPeerCertificate of ours (only the certificates are read per
// handshake). The client listener's TLS is terminated by etcd's own
// listener (not a gRPC credential we could replace), and raft's dialers
// build their round trippers once. So a member cannot be made to trust a
// new CA without a restart. Instead the new CA is cross-signed by the old
// one (pki.CrossSign), and every certificate it issues carries that
// cross-certificate after it: a TLS end that trusts only the old CA
// verifies it through it, one that trusts the new CA directly. Nothing
// reloads its trust, nothing restarts, and the devices move one by one
// through the renewal machinery (renew.go), which keeps their keys.
//
// The phases, in the cluster's record (caKey), so that a rotation is
// resumable from any member and visible in "cluster status":
//
//   - reissue: the member asked creates the new CA, cross-signs it with
//     the old, seals the new key under the old CA's key (only a holder of
//     the old key opens it: a backup of the record alone does not) and
//     records it with a rotate-certs request, in one write. Each member
//     applying it (syncCA) writes the new key over the old one (the old
//     CA's key is deleted: the member signs nothing with it again), the
//     cross-certificate beside it (caChainFile) and a trust file of both
//     CAs (new first: it is the one it signs with), for its next start.
//     Then every member renews its certificate under the new CA, and every
//     replica at its next check; replicas add the new CA to their trust
//     file when the old one vouches for it (pki.AcceptTrust).
//   - done: once every device's newest certificate is the new CA's, a
//     finish records the phase without the sealed key and deletes the
//     old CA's certificates from the record (a device's open connections
//     go on: the record admits them by their key, which the renewal
//     kept). Each member's trust file then holds the new CA only; each
//     replica follows at its next check.
//
// Each member records what it applied (caMembersPrefix) for the status.
// A member off during the rotation comes back by itself while it is in
// reissue: it dials the others with its old certificate (their peer
// gates and etcd still trust the old CA, or both), reads the record,
// opens the sealed key with the old key it still holds, and renews. The
// rotation cannot finish without it (rotate-ca names it); a device that
// will not come back is removed (cluster remove), and the rotation
// finishes without it.

const (
	// caKey holds the last CA rotation (caRecord).
	caKey = trustPrefix + "ca"
	// caMembersPrefix + a member's name: what it applied (caAck).
	caMembersPrefix = trustPrefix + "ca-members/"
)

// caRecord is a CA rotation in the record.
type caRecord struct {
	Phase    string    `json:"phase"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	// Cert is the new CA, Old the one it replaces.
	Cert string `json:"cert"`
	Old  string `json:"old"`
	// SealedKey is the new CA's key sealed under the old CA's key
	// (pki.SealKey), until the rotation is done.
	SealedKey string `json:"sealedKey,omitempty"`
	// Chain is what the new CA's certificates carry: its
	// cross-certificate by the old CA, then the old CA's own chain.
	Chain string `json:"chain"`

	newID string // pki.KeyID of Cert, set when read
}

// caAck is what a member applied of a rotation.
type caAck struct {
	Started time.Time `json:"started"`
	Phase   string    `json:"phase"`
	Trusts  []string  `json:"trusts"`
	Signs   string    `json:"signs"`
}

// parseCARecord reads a caRecord from the record.
func parseCARecord(value []byte) (*caRecord, error) {
	var rec caRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return nil, err
	}
	ca, err := pki.ParseCertificate([]byte(rec.Cert))
	if err != nil {
		return nil, err
	}
	rec.newID = pki.KeyID(ca)
	return &rec, nil
}

// caChainFile holds the chain the member's CA appends to what it issues.
func caChainFile(p Paths) string { return filepath.Join(filepath.Dir(p.CAFile), "ca-chain.crt") }

// loadCA reads the CA the member signs with: the first certificate of its
// CA file, its key, and its chain.
func loadCA(p Paths) (*pki.Authority, error) {
	caCert, err := os.ReadFile(p.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	caKey, err := os.ReadFile(p.CAKeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster CA key: %w", err)
	}
	ca, err := pki.ParseAuthority(caCert, caKey)
	if err != nil {
		return nil, err
	}
	chain, err := os.ReadFile(caChainFile(p))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster CA chain: %w", err)
	}
	ca.Chain = chain
	return ca, nil
}

// caRecordNow is the member's mirror of the rotation, nil when none.
func (g *gate) caRecordNow() *caRecord {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.ca == nil {
		return nil
	}
	c := *g.ca
	return &c
}

// reissueDue reports whether a certificate issued by CA issuer must
// renew for the last rotation: during it, and after it for a device that
// missed its renewal's answer.
func (g *gate) reissueDue(issuer string) bool {
	rec := g.caRecordNow()
	return rec != nil && issuer != rec.newID
}

// healOwnCert re-signs the member's certificate, for its own key, with
// the CA it holds when its trust file no longer verifies it: a member
// that stopped after its renewal under a new CA was recorded but before
// it wrote the file, and restarts after the rotation finished, would
// otherwise present a certificate of the CA its own trust dropped (its
// own clients would refuse its server). The record admits the result by
// its key, which the recorded renewal holds; its next renewal records
// one. Start calls it before etcd starts.
func healOwnCert(p Paths, validity time.Duration, log *slog.Logger) error {
	certPEM, err := os.ReadFile(p.CertFile)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	trust, err := os.ReadFile(p.CAFile)
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	if pki.VerifyChain(certPEM, trust) == nil {
		return nil
	}
	ca, err := loadCA(p)
	if err != nil {
		return err
	}
	cert, err := pki.ParseCertificate(certPEM)
	if err != nil {
		return fmt.Errorf("cluster: %s: %w", p.CertFile, err)
	}
	if validity <= 0 {
		validity = pki.DefaultCertValidity
	}
	renewed, err := ca.Resign(cert, validity)
	if err != nil {
		return err
	}
	if err := WriteFile(p.CertFile, renewed, 0o644); err != nil {
		return err
	}
	log.Warn("The member's certificate was not its trusted CA's (a CA rotation finished while its renewal was unwritten): re-signed it for its own key",
		"ca", pki.KeyID(ca.Cert))
	return nil
}

// syncCA makes the member's CA files follow the rotation in the record
// (the package comment above says what each phase writes). It is
// idempotent, and the key is written first: a crash between the files
// leaves a key the next call recognizes as the new CA's.
func (m *Member) syncCA() error {
	m.caMu.Lock()
	defer m.caMu.Unlock()
	rec := m.gate.caRecordNow()
	if rec == nil {
		return nil
	}
	p := m.cfg.Paths
	newCA, err := pki.ParseCertificate([]byte(rec.Cert))
	if err != nil {
		return fmt.Errorf("cluster: the rotation's CA: %w", err)
	}
	keyPEM, err := os.ReadFile(p.CAKeyFile)
	if err != nil {
		return fmt.Errorf("cluster CA key: %w", err)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return fmt.Errorf("cluster CA key: %w", err)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(newCA.PublicKey) {
		if rec.SealedKey == "" {
			return errors.New("cluster: the cluster CA was rotated while this member was off and the rotation is done: " +
				"its certificate and key are the old CA's, which the others no longer trust; remove it (cluster remove) and join it again")
		}
		old, err := pki.ParseAuthority([]byte(rec.Old), keyPEM)
		if err != nil {
			return fmt.Errorf("cluster: the CA rotation's key is sealed under a CA this member does not hold (two rotations while it was off?): %w", err)
		}
		newKey, err := old.OpenKey(rec.SealedKey)
		if err != nil {
			return fmt.Errorf("cluster: open the new CA's key: %w", err)
		}
		if _, err := pki.ParseAuthority([]byte(rec.Cert), newKey); err != nil {
			return fmt.Errorf("cluster: the new CA's key: %w", err)
		}
		if err := WriteFile(p.CAKeyFile, newKey, 0o600); err != nil {
			return err
		}
		m.log.Info("The cluster CA is being rotated: this member signs with the new CA; the old CA's key is deleted", "member", m.cfg.Name, "ca", rec.newID)
	}
	if cur, err := os.ReadFile(caChainFile(p)); err != nil || string(cur) != rec.Chain {
		if err := WriteFile(caChainFile(p), []byte(rec.Chain), 0o644); err != nil {
			return err
		}
	}
	trust := rec.Cert
	if rec.Phase == clusterapi.CAPhaseReissue {
		trust += rec.Old
	}
	if cur, err := os.ReadFile(p.CAFile); err != nil || string(cur) != trust {
		if err := WriteFile(p.CAFile, []byte(trust), 0o644); err != nil {
			return err
		}
		if rec.Phase == clusterapi.CAPhaseDone {
			m.log.Info("The old cluster CA is dropped from this member's trust", "member", m.cfg.Name, "ca", rec.newID)
		}
	}
	return nil
}

// ackCA records what the member applied of the rotation, when the record
// does not say so yet.
func (m *Member) ackCA(ctx context.Context) error {
	rec := m.gate.caRecordNow()
	if rec == nil {
		return nil
	}
	trustPEM, err := os.ReadFile(m.cfg.Paths.CAFile)
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	cas, err := pki.ParseCertificates(trustPEM)
	if err != nil || len(cas) == 0 {
		return fmt.Errorf("cluster CA %s: %v", m.cfg.Paths.CAFile, err)
	}
	ack := caAck{Started: rec.Started, Phase: rec.Phase, Signs: pki.KeyID(cas[0])}
	for _, c := range cas {
		ack.Trusts = append(ack.Trusts, pki.KeyID(c))
	}
	m.gate.mu.RLock()
	cur, ok := m.gate.caAcks[m.cfg.Name]
	m.gate.mu.RUnlock()
	if ok && cur.Started.Equal(ack.Started) && cur.Phase == ack.Phase && cur.Signs == ack.Signs && slices.Equal(cur.Trusts, ack.Trusts) {
		return nil
	}
	data, _ := json.Marshal(ack)
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	_, err = m.client.Put(clientv3.WithRequireLeader(ctx), caMembersPrefix+m.cfg.Name, string(data))
	return err
}

// followCA applies the rotation to the member's files and records it;
// the renewal loop calls it whenever the record changes.
func (m *Member) followCA(ctx context.Context) error {
	if err := m.syncCA(); err != nil {
		return err
	}
	return m.ackCA(ctx)
}

// RotateCA starts a rotation of the cluster CA, answers the one under
// way, or finishes it (req.Finish) once every device holds a certificate
// of the new CA: then it fails with clusterapi.ErrRotationPending naming
// those that do not.
func (s *Membership) RotateCA(ctx context.Context, req clusterapi.RotateCARequest) (clusterapi.CAStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	c := s.m.client
	resp, err := c.Get(clientv3.WithRequireLeader(ctx), caKey)
	if err != nil {
		return clusterapi.CAStatus{}, fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	var rec *caRecord
	var rev int64 // caKey's ModRevision, 0 when absent: the writes below are compare-and-swaps on it
	if len(resp.Kvs) > 0 {
		if rec, err = parseCARecord(resp.Kvs[0].Value); err != nil {
			return clusterapi.CAStatus{}, fmt.Errorf("cluster: the CA rotation in the record: %w", err)
		}
		rev = resp.Kvs[0].ModRevision
	}
	switch {
	case req.Finish && (rec == nil || rec.Phase != clusterapi.CAPhaseReissue):
		return clusterapi.CAStatus{}, fmt.Errorf("%w: no CA rotation is under way", clusterapi.ErrRotationPending)
	case req.Finish:
		return s.finishCA(ctx, rec, rev)
	case rec != nil && rec.Phase == clusterapi.CAPhaseReissue:
		return s.CAStatus(), nil // resumed
	}
	if err := s.m.syncCA(); err != nil {
		return clusterapi.CAStatus{}, err
	}
	old, err := loadCA(s.m.cfg.Paths)
	if err != nil {
		return clusterapi.CAStatus{}, err
	}
	next, err := pki.NewAuthority("leasehold-cluster-ca@" + time.Now().UTC().Format("20060102T150405Z"))
	if err != nil {
		return clusterapi.CAStatus{}, err
	}
	cross, err := old.CrossSign(next.Cert)
	if err != nil {
		return clusterapi.CAStatus{}, err
	}
	sealed, err := old.SealKey(next.KeyPEM)
	if err != nil {
		return clusterapi.CAStatus{}, err
	}
	// The old chain goes on after the cross-certificate (a process started
	// before the previous rotation reaches its CA through it), less what
	// has expired.
	chain := append([]byte{}, cross...)
	prev, _ := pki.ParseCertificates(old.Chain)
	for _, x := range prev {
		if time.Now().Before(x.NotAfter) {
			chain = append(chain, pemCert(x.Raw)...)
		}
	}
	now := time.Now().UTC()
	data, _ := json.Marshal(caRecord{Phase: clusterapi.CAPhaseReissue, Started: now, Cert: string(next.CertPEM),
		Old: string(old.CertPEM), SealedKey: sealed, Chain: string(chain)})
	tx, err := c.Txn(clientv3.WithRequireLeader(ctx)).If(clientv3.Compare(clientv3.ModRevision(caKey), "=", rev)).
		Then(clientv3.OpPut(caKey, string(data)), clientv3.OpPut(rotateKey, now.Format(time.RFC3339Nano))).Commit()
	if err != nil {
		return clusterapi.CAStatus{}, fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	if !tx.Succeeded {
		return clusterapi.CAStatus{}, fmt.Errorf("%w: another rotate-ca changed the rotation meanwhile", clusterapi.ErrTryAgain)
	}
	s.m.log.Info("CA rotation started: every member signs with the new CA and trusts both; every device renews under it", "ca", pki.KeyID(next.Cert), "old", pki.KeyID(old.Cert))
	st := s.CAStatus()
	st.Phase, st.Started = clusterapi.CAPhaseReissue, now
	st.Current = caInfo(next.Cert)
	o := caInfo(old.Cert)
	st.Old = &o
	return st, nil
}

// finishCA ends the rotation rec (at ModRevision rev) when every device
// holds a certificate of the new CA: one write records the phase done,
// without the sealed key. The old CA's certificates stay in the record
// until their devices' next renewals drop them (renewKeep): a device
// that crashed between its renewal's record and its file, or never got
// the answer, still renews with the old one (Renew, renewMember).
func (s *Membership) finishCA(ctx context.Context, rec *caRecord, rev int64) (clusterapi.CAStatus, error) {
	c := s.m.client
	resp, err := c.Get(clientv3.WithRequireLeader(ctx), credentialsPrefix, clientv3.WithPrefix())
	if err != nil {
		return clusterapi.CAStatus{}, fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	creds := map[string]Credential{}
	for _, kv := range resp.Kvs {
		var cred Credential
		if json.Unmarshal(kv.Value, &cred) == nil {
			creds[strings.TrimPrefix(string(kv.Key), credentialsPrefix)] = cred
		}
	}
	if lag := lagging(creds, rec.newID); len(lag) > 0 {
		return clusterapi.CAStatus{}, fmt.Errorf("%w: no certificate of the new CA yet: %s (a device that is off renews when it starts; one that will not come back is removed with cluster remove)",
			clusterapi.ErrRotationPending, strings.Join(lag, ", "))
	}
	done := *rec
	done.Phase, done.Finished, done.SealedKey = clusterapi.CAPhaseDone, time.Now().UTC(), ""
	data, _ := json.Marshal(done)
	tx, err := c.Txn(clientv3.WithRequireLeader(ctx)).If(clientv3.Compare(clientv3.ModRevision(caKey), "=", rev)).
		Then(clientv3.OpPut(caKey, string(data))).Commit()
	if err != nil {
		return clusterapi.CAStatus{}, fmt.Errorf("%w: %w", clusterapi.ErrTryAgain, err)
	}
	if !tx.Succeeded {
		return clusterapi.CAStatus{}, fmt.Errorf("%w: another rotate-ca changed the rotation meanwhile", clusterapi.ErrTryAgain)
	}
	s.m.log.Info("CA rotation finished: the old CA is dropped from every member's trust", "ca", rec.newID)
	st := s.CAStatus()
	st.Phase, st.Finished, st.Old, st.Lagging = clusterapi.CAPhaseDone, done.Finished, nil, nil
	return st, nil
}

// lagging names the devices ("member m3") whose newest certificate was
// not issued by CA id.
func lagging(creds map[string]Credential, id string) []string {
	newest := map[[2]string]Credential{}
	for _, c := range creds {
		k := [2]string{c.Kind, c.Name}
		if cur, ok := newest[k]; !ok || c.Issued.After(cur.Issued) {
			newest[k] = c
		}
	}
	var out []string
	for k, c := range newest {
		if c.CA != id {
			out = append(out, k[0]+" "+k[1])
		}
	}
	sort.Strings(out)
	return out
}

func caInfo(ca *x509.Certificate) clusterapi.CA {
	return clusterapi.CA{ID: pki.KeyID(ca), Subject: ca.Subject.CommonName, NotAfter: ca.NotAfter.UTC()}
}

// CAStatus is the cluster CA and its last rotation as this member applied
// the record.
func (s *Membership) CAStatus() clusterapi.CAStatus {
	var st clusterapi.CAStatus
	if trust, err := os.ReadFile(s.m.cfg.Paths.CAFile); err == nil {
		if cas, err := pki.ParseCertificates(trust); err == nil && len(cas) > 0 {
			st.Current = caInfo(cas[0])
		}
	}
	g := s.m.gate
	rec := g.caRecordNow()
	if rec == nil {
		return st
	}
	st.Phase, st.Started, st.Finished = rec.Phase, rec.Started, rec.Finished
	if ca, err := pki.ParseCertificate([]byte(rec.Cert)); err == nil {
		st.Current = caInfo(ca)
	}
	if rec.Phase == clusterapi.CAPhaseReissue {
		if ca, err := pki.ParseCertificate([]byte(rec.Old)); err == nil {
			o := caInfo(ca)
			st.Old = &o
		}
	}
	g.mu.RLock()
	if rec.Phase == clusterapi.CAPhaseReissue {
		st.Lagging = lagging(g.creds, rec.newID)
	}
	acks := map[string]caAck{}
	for n, a := range g.caAcks {
		acks[n] = a
	}
	g.mu.RUnlock()
	for _, mem := range s.m.etcd.Server.Cluster().Members() {
		if mem.Name == "" {
			continue
		}
		cm := clusterapi.CAMember{Name: mem.Name}
		if a, ok := acks[mem.Name]; ok && a.Started.Equal(rec.Started) {
			cm.Phase, cm.Trusts, cm.Signs = a.Phase, a.Trusts, a.Signs
		}
		st.Members = append(st.Members, cm)
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].Name < st.Members[j].Name })
	return st
}

// pemCert is der as PEM.
func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
