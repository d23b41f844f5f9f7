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
	// RotateCAPath starts a rotation of the cluster CA, or resumes or
	// finishes the one under way (POST a RotateCARequest, admin; it
	// answers a CAStatus).
	RotateCAPath = "/leasehold/v1/cluster/rotate-ca"
)

// The phases of a CA rotation (docs/cluster.md, "Certificate rotation").
const (
	// CAPhaseReissue: the new CA is recorded; every member signs with it
	// and trusts both, every device renews under it.
	CAPhaseReissue = "reissue"
	// CAPhaseDone: every device held a certificate of the new CA; the
	// old one is dropped from every trust file and its key is gone.
	CAPhaseDone = "done"
)

// ErrRotationPending refuses to finish a CA rotation while a device
// holds no certificate of the new CA (409).
var ErrRotationPending = errors.New("the CA rotation cannot finish yet")

// RotateCARequest is POST RotateCAPath: Finish drops the old CA once
// every device was re-issued; without it the request starts a rotation,
// or answers the one under way.
type RotateCARequest struct {
	Finish bool `json:"finish,omitempty"`
}

// CA is one cluster CA.
type CA struct {
	// ID is its subject key identifier in hexadecimal: the authority key
	// identifier of what it issued (Certificate.CA).
	ID       string    `json:"id"`
	Subject  string    `json:"subject"`
	NotAfter time.Time `json:"notAfter"`
}

// CAStatus is the cluster CA and the last CA rotation, as GET StatusPath
// and POST RotateCAPath report them.
type CAStatus struct {
	// Phase is the last rotation's: "" when the cluster never rotated
	// its CA, CAPhaseReissue while one runs, CAPhaseDone after.
	Phase string `json:"phase,omitempty"`
	// Current is the CA members sign with; Old the one a rotation under
	// way replaces (still trusted).
	Current  CA        `json:"current"`
	Old      *CA       `json:"old,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// Members is what each member applied of the rotation: the CAs its
	// trust file holds and the one it signs with.
	Members []CAMember `json:"members,omitempty"`
	// Lagging are the devices ("member m3", "replica r1") whose newest
	// certificate is not the current CA's, during CAPhaseReissue.
	Lagging []string `json:"lagging,omitempty"`
}

// CAMember is one member's part of a CA rotation.
type CAMember struct {
	Name string `json:"name"`
	// Phase is the rotation's phase the member last applied ("" none:
	// it was off, or has not caught up).
	Phase  string   `json:"phase,omitempty"`
	Trusts []string `json:"trusts,omitempty"` // CA IDs of its trust file
	Signs  string   `json:"signs,omitempty"`  // the CA ID of its key
}

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
	// CA is the ID of the CA that issued it (CA.ID; empty for one
	// recorded before leasehold recorded it).
	CA string `json:"ca,omitempty"`
	// Warning is set when it expires within 30 days (or a quarter of its
	// life): its holder has failed to renew it for a while, or is off.
	Warning string `json:"warning,omitempty"`
}

// RotateCertsResponse answers POST RotateCertsPath: every certificate
// issued before RequestedAt renews.
type RotateCertsResponse struct {
	RequestedAt time.Time `json:"requestedAt"`
}
