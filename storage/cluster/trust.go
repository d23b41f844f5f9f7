package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasehold/leasehold/internal/pki"
)

// The trust model of the cluster's client port.
//
// Every member holds the cluster CA's key (it admits joiners), so a CA
// signature alone proves nothing once a device is stolen: its copy of the
// key mints any certificate. What the members' client port accepts is
// therefore not "a certificate of the CA" but "a certificate the cluster
// admitted": the SHA-256 fingerprint of every certificate a join issued is
// recorded in etcd itself, under trustPrefix, with the kind (member or
// replica) and the name of its device. A gRPC interceptor on every member
// (gate.go) looks each request's client certificate up in that record.
// Removing a device deletes its records in one raft write: every member
// applies it within milliseconds, refuses the device's next request and
// cancels its open streams (watches, lease keep-alives). A certificate the
// stolen key mints has a fingerprint nobody recorded.
//
// Why not etcd's own auth (users, roles, the user name taken from the
// client certificate's CN): it trusts the CN, which the stolen CA key
// forges (a certificate with CN "root" is root); etcd lets any
// authenticated user compact; and an in-process client (the member's own
// store, going in-process for speed) carries no certificate at all, where
// the interceptor is simply not on the path.
//
// The cluster token lives there too (tokenKey), so that a removal rotates
// it everywhere at once: the removed device's copy of the token no longer
// admits it.
const (
	// trustPrefix is the members-only namespace: outside every replica's
	// key range (Provision refuses an --etcd-prefix that would cover it).
	trustPrefix = "/_leasehold-cluster/"
	// credentialsPrefix + a certificate's fingerprint: its Credential.
	credentialsPrefix = trustPrefix + "credentials/"
	// tokenKey is the cluster token joiners must prove they know.
	tokenKey = trustPrefix + "token"
	// enforceKey marks a cluster whose client port admits recorded
	// certificates only. Clusters created before the record existed lack
	// it and accept any certificate of their CA, as they did.
	enforceKey = trustPrefix + "enforce"
)

// Credential kinds.
const (
	KindMember  = "member"
	KindReplica = "replica"
)

// Credential is what the cluster knows of an admitted certificate.
// Issued, NotAfter and Serial are empty on credentials recorded before
// certificates were renewed (renew.go).
type Credential struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Issued is when the member that recorded it signed it; a rotation
	// (rotate-certs) renews every certificate issued before it asked.
	Issued   time.Time `json:"issued,omitzero"`
	NotAfter time.Time `json:"notAfter,omitzero"`
	// Serial is the certificate's serial number in hexadecimal (for the
	// expiry metric).
	Serial string `json:"serial,omitempty"`
	// Key is the SHA-256 of the certificate's public key (keyHash). A
	// renewal keeps the key, and TLS proves its holder has it: a
	// connection opened with a certificate the record has since dropped
	// (renewKeep) stays admitted while a credential of the same key is
	// recorded, and ends when the device is removed.
	Key string `json:"key,omitempty"`
	// CA is the ID of the CA that issued it (pki.IssuerID): a CA
	// rotation (carotate.go) waits for every device to hold one of the
	// new CA's.
	CA string `json:"ca,omitempty"`
}

// keyHash is the SHA-256 of cert's SubjectPublicKeyInfo, in hexadecimal.
func keyHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// credentialOf is the credential of cert, issued now, for kind name.
func credentialOf(cert *x509.Certificate, kind, name string) Credential {
	return Credential{Kind: kind, Name: name, Issued: time.Now().UTC(), NotAfter: cert.NotAfter.UTC(), Serial: cert.SerialNumber.Text(16), Key: keyHash(cert), CA: pki.IssuerID(cert)}
}

// Fingerprint is the SHA-256 of a certificate's DER, in hexadecimal.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// pemFingerprint is the Fingerprint of the first certificate in certPEM.
func pemFingerprint(certPEM []byte) (string, *x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", nil, err
	}
	return Fingerprint(block.Bytes), cert, nil
}

// fileFingerprint is the Fingerprint of the certificate in file.
func fileFingerprint(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	fp, _, err := pemFingerprint(data)
	if err != nil {
		return "", fmt.Errorf("cluster: %s: %w", file, err)
	}
	return fp, nil
}

// checkPrefix refuses a replicas' key prefix that covers the members'
// namespace: a replica could then read the token and the credentials.
func checkPrefix(prefix string) error {
	if strings.HasPrefix(trustPrefix, prefix) {
		return fmt.Errorf("--etcd-prefix %q covers the members' own keys (%s): choose another", prefix, trustPrefix)
	}
	return nil
}

// newToken is a fresh 256-bit cluster token, in hexadecimal.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// recordCredential records an admitted certificate (certPEM) as kind
// name's, through a member's client.
func recordCredential(ctx context.Context, c *clientv3.Client, certPEM []byte, kind, name string) (string, error) {
	fp, cert, err := pemFingerprint(certPEM)
	if err != nil {
		return "", fmt.Errorf("cluster: record credential of %s: %w", name, err)
	}
	data, _ := json.Marshal(credentialOf(cert, kind, name))
	if _, err := c.Put(ctx, credentialsPrefix+fp, string(data)); err != nil {
		return "", fmt.Errorf("cluster: record credential of %s: %w", name, err)
	}
	return fp, nil
}

// bootstrapTrust makes a new cluster enforce its record: it records the
// first member's certificate and the token, in one write.
func bootstrapTrust(ctx context.Context, c *clientv3.Client, certFile, name string, token []byte) error {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return fmt.Errorf("cluster: record the first member's credential: %w", err)
	}
	selfFP, cert, err := pemFingerprint(certPEM)
	if err != nil {
		return fmt.Errorf("cluster: record the first member's credential: %s: %w", certFile, err)
	}
	data, _ := json.Marshal(credentialOf(cert, KindMember, name))
	ops := []clientv3.Op{clientv3.OpPut(credentialsPrefix+selfFP, string(data)), clientv3.OpPut(enforceKey, "1")}
	if len(token) > 0 {
		ops = append(ops, clientv3.OpPut(tokenKey, string(token)))
	}
	if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("cluster: record the first member's credential: %w", err)
	}
	return nil
}

// revokeCredentials deletes every credential of kind name and rotates the
// cluster token, in one write (a linearizable read finds them first). It
// returns how many certificates it revoked.
func revokeCredentials(ctx context.Context, c *clientv3.Client, kind, name string) (fingerprints []string, err error) {
	resp, err := c.Get(ctx, credentialsPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		var cred Credential
		if json.Unmarshal(kv.Value, &cred) == nil && cred.Name == name && cred.Kind == kind {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
			fingerprints = append(fingerprints, strings.TrimPrefix(string(kv.Key), credentialsPrefix))
		}
	}
	ops = append(ops, clientv3.OpPut(tokenKey, newToken()))
	if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
		return nil, err
	}
	return fingerprints, nil
}

// awaitRevoked waits until this member's gate has applied the deletion of
// the fingerprints' credentials (it follows the record by a watch, so a
// revocation's write returns before the gate knows of it): the revoking
// command returns only once the device's next request to this member is
// refused. It reports whether that happened before ctx ended.
func (g *gate) awaitRevoked(ctx context.Context, fingerprints []string) bool {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		g.mu.RLock()
		held := false
		for _, fp := range fingerprints {
			if _, ok := g.creds[fp]; ok {
				held = true
				break
			}
		}
		g.mu.RUnlock()
		if !held {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// names lists the names holding a credential of kind, as this
// member applied them.
func (g *gate) names(kind string) map[string]bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := map[string]bool{}
	for _, c := range g.creds {
		if c.Kind == kind {
			out[c.Name] = true
		}
	}
	return out
}
