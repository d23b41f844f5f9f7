package clusterapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// The rotation endpoints (docs/cluster.md, "Certificate rotation").
const (
	// RenewPath renews a member's or replica's certificate on POST (a
	// RenewRequest). It is public like the join (rate-limited with it):
	// the request proves possession of the key of a certificate the
	// cluster admitted, and the answer is a certificate for that key
	// only, useless to anyone else.
	RenewPath = "/leasehold/v1/cluster/renew"
	// RotateCertsPath asks every member and replica to renew its
	// certificate now (POST, admin); RotateTokenPath replaces the
	// cluster token (POST, admin).
	RotateCertsPath = "/leasehold/v1/cluster/rotate-certs"
	RotateTokenPath = "/leasehold/v1/cluster/rotate-token"
)

// ErrNotAdmitted refuses a renewal whose certificate the cluster does not
// (or no longer) admit, whose request its key did not sign, or that has
// expired without a valid proof of the current cluster token (403).
var ErrNotAdmitted = errors.New("certificate not admitted")

// RenewRequest is POST RenewPath: the holder's certificate and a
// certificate request for the same key, signed by it.
//
// A certificate that expired (its device was off for longer than its
// life) renews only with a proof of the current cluster token as well,
// made as the join's (Nonce from POST JoinNoncePath on the same
// connection, Proof is RenewProof): the key alone could have been copied
// off a device the operator no longer trusts but forgot to remove, and
// the token is what admits a device.
type RenewRequest struct {
	Cert  string `json:"cert"`
	CSR   string `json:"csr"`
	Nonce string `json:"nonce,omitempty"`
	Proof string `json:"proof,omitempty"`
	// Session is the keying material of the TLS session the request came
	// on (empty on loopback without TLS), which the proof covers: the
	// server sets it, it never crosses the wire.
	Session []byte `json:"-"`
}

// RenewProofLabel labels the renewal's proof: it never verifies as a
// join's, nor the reverse.
const RenewProofLabel = "leasehold cluster renew v1: holder"

// RenewProof is the proof of an expired certificate's holder that it
// knows token: an HMAC-SHA256 under it over RenewProofLabel, the
// session's exported keying material and every field of req but the
// proof, so that it is worth one request, on one session, once.
func RenewProof(token, ekm []byte, req *RenewRequest) string {
	mac := hmac.New(sha256.New, token)
	writeField(mac, RenewProofLabel)
	writeField(mac, string(ekm))
	for _, f := range []string{req.Cert, req.CSR, req.Nonce} {
		writeField(mac, f)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// ValidateProof checks the shape of the request's nonce and proof: both
// empty, or a nonce as POST JoinNoncePath answers it and a proof of
// sha256.Size hex bytes.
func (r *RenewRequest) ValidateProof() error {
	if r.Nonce == "" && r.Proof == "" {
		return nil
	}
	if len(r.Nonce) != 2*NonceBytes || !isHex(r.Nonce) {
		return bad("nonce", "must be the hex digits answered by POST "+JoinNoncePath)
	}
	if len(r.Proof) != 2*sha256.Size || !isHex(r.Proof) {
		return bad("proof", "must be 64 hex digits")
	}
	return nil
}

// RenewResponse answers a RenewRequest: a renewed certificate (Cert) with
// the CA bundle, or when the certificate is not due yet, when it is
// (RenewAt).
type RenewResponse struct {
	Cert    string    `json:"cert,omitempty"`
	CACert  string    `json:"caCert,omitempty"`
	RenewAt time.Time `json:"renewAt,omitzero"`
}

// Certificate is the newest certificate of one member or replica, as
// GET StatusPath reports it.
type Certificate struct {
	Kind     string    `json:"kind"` // member or replica
	Name     string    `json:"name"`
	Serial   string    `json:"serial,omitempty"`
	Issued   time.Time `json:"issued,omitzero"`
	NotAfter time.Time `json:"notAfter,omitzero"`
	// RenewAt is when its holder renews it: at about two thirds of its
	// life, or at once after a rotation asked it to.
	RenewAt time.Time `json:"renewAt,omitzero"`
	// ExpiresInSeconds is NotAfter less the answering member's clock.
	ExpiresInSeconds int64 `json:"expiresInSeconds"`
	// Warning is set when it expires within 30 days (or a quarter of its
	// life): its holder has failed to renew it for a while, or is off.
	Warning string `json:"warning,omitempty"`
}

// RotateCertsResponse answers POST RotateCertsPath: every certificate
// issued before RequestedAt renews.
type RotateCertsResponse struct {
	RequestedAt time.Time `json:"requestedAt"`
}
