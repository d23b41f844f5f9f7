package clusterapi

import (
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
// (or no longer) admit, or that has expired (403).
var ErrNotAdmitted = errors.New("certificate not admitted")

// RenewRequest is POST RenewPath: the holder's certificate and a
// certificate request for the same key, signed by it.
type RenewRequest struct {
	Cert string `json:"cert"`
	CSR  string `json:"csr"`
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
