package web

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/web/apiserver"
)

// ClusterRotation is the optional rotation side of a Cluster
// (storage/cluster's Membership): certificate renewal, which is public
// like the join (the request proves possession of an admitted
// certificate's key), and the admin rotations.
type ClusterRotation interface {
	Renew(ctx context.Context, req clusterapi.RenewRequest) (clusterapi.RenewResponse, error)
	RotateCerts(ctx context.Context) (clusterapi.RotateCertsResponse, error)
	RotateToken(ctx context.Context) error
	// RotateCA starts, resumes or finishes a CA rotation;
	// clusterapi.ErrRotationPending answers 409.
	RotateCA(ctx context.Context, req clusterapi.RotateCARequest) (clusterapi.CAStatus, error)
	// Certificates lists the newest certificate of every member and
	// replica (the expiry metric); CertificatesNote is /readyz's
	// warning while one nears its expiry.
	Certificates() []clusterapi.Certificate
	CertificatesNote() string
}

// serveClusterRotation answers the rotation endpoints; it reports false
// for another path.
func (s *Server) serveClusterRotation(ctx context.Context, rc *fasthttp.RequestCtx, p string) bool {
	if p != clusterapi.RenewPath && p != clusterapi.RotateCertsPath && p != clusterapi.RotateTokenPath && p != clusterapi.RotateCAPath {
		return false
	}
	r, ok := s.cluster.(ClusterRotation)
	if !ok {
		notFound(rc)
		return true
	}
	if !rc.IsPost() {
		s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
		return true
	}
	var err error
	var out any
	switch p {
	case clusterapi.RenewPath:
		out, err = s.serveRenew(ctx, rc, r)
	case clusterapi.RotateCertsPath:
		out, err = r.RotateCerts(ctx)
	case clusterapi.RotateTokenPath:
		err = r.RotateToken(ctx)
		out = map[string]string{"rotated": "token"}
	case clusterapi.RotateCAPath:
		var req clusterapi.RotateCARequest
		if body := rc.PostBody(); len(body) > 0 {
			if jerr := json.Unmarshal(body, &req); jerr != nil {
				err = errors.Join(clusterapi.ErrInvalidRequest, errors.New("the body is not a JSON rotate-ca request"))
				break
			}
		}
		out, err = r.RotateCA(ctx, req)
	}
	switch {
	case err == nil:
		writeJSON(rc, out)
	case errors.Is(err, clusterapi.ErrInvalidRequest):
		s.api.WriteError(rc, apierrors.NewBadRequest(err.Error()))
	case errors.Is(err, clusterapi.ErrNotAdmitted):
		s.joinRefused(rc, "renewal of a certificate not admitted", "")
		s.api.WriteError(rc, apierrors.NewForbidden(membersResource, "", err))
	case errors.Is(err, clusterapi.ErrRotationPending):
		s.api.WriteError(rc, apierrors.NewConflict(membersResource, "ca", err))
	case errors.Is(err, clusterapi.ErrTryAgain):
		s.api.WriteError(rc, tryAgain(err))
	default:
		s.api.WriteError(rc, apierrors.NewInternalError(err))
	}
	return true
}

// serveRenew decodes a renewal request. One that carries a proof of the
// cluster token (an expired certificate's) has it bound as the join's:
// its nonce is used up here, once, and the TLS session's keying material
// is what the proof must cover (none on loopback without TLS, where the
// nonce alone refuses a replay).
func (s *Server) serveRenew(ctx context.Context, rc *fasthttp.RequestCtx, r ClusterRotation) (any, error) {
	body := rc.PostBody()
	if len(body) > clusterapi.MaxJoinBodyBytes {
		return nil, errors.Join(clusterapi.ErrInvalidRequest, errors.New("a renewal request is at most "+strconv.Itoa(clusterapi.MaxJoinBodyBytes)+" bytes"))
	}
	var req clusterapi.RenewRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errors.Join(clusterapi.ErrInvalidRequest, errors.New("the body is not a JSON renewal request"))
	}
	if err := req.ValidateProof(); err != nil {
		return nil, err
	}
	if req.Nonce != "" {
		if st := rc.TLSConnectionState(); st != nil {
			ekm, err := st.ExportKeyingMaterial(clusterapi.EKMLabel, nil, clusterapi.EKMLength)
			if err != nil {
				return nil, errors.Join(clusterapi.ErrInvalidRequest, errors.New("a renewal with the cluster token needs TLS 1.3 (or 1.2 with extended master secret): "+err.Error()))
			}
			req.Session = ekm
		} else if !rc.RemoteIP().IsLoopback() {
			return nil, errors.Join(clusterapi.ErrNotAdmitted, errors.New("a renewal with the cluster token over plain HTTP is allowed on loopback only; serve the API over TLS"))
		}
		if !s.join.nonces.Consume(req.Nonce) {
			return nil, errors.Join(clusterapi.ErrNotAdmitted, errors.New("the renewal's nonce is unknown, expired or already used (a replay is refused): "+
				"ask POST "+clusterapi.JoinNoncePath+" for a fresh one and use it at once"))
		}
	}
	return r.Renew(ctx, req)
}
