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

func (s *Server) serveRenew(ctx context.Context, rc *fasthttp.RequestCtx, r ClusterRotation) (any, error) {
	body := rc.PostBody()
	if len(body) > clusterapi.MaxJoinBodyBytes {
		return nil, errors.Join(clusterapi.ErrInvalidRequest, errors.New("a renewal request is at most "+strconv.Itoa(clusterapi.MaxJoinBodyBytes)+" bytes"))
	}
	var req clusterapi.RenewRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errors.Join(clusterapi.ErrInvalidRequest, errors.New("the body is not a JSON renewal request"))
	}
	return r.Renew(ctx, req)
}
