package web

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/web/apiserver"
)

// The membership endpoints of a server running an embedded etcd member.
// Status and removal are admin endpoints (isAdminPath); the join is
// authenticated by the cluster token alone, since a joiner has no other
// credential yet.
const (
	clusterPath        = clusterapi.StatusPath
	clusterJoinPath    = clusterapi.JoinPath
	clusterMembersPath = clusterapi.MembersPath
)

// Cluster is the member's side of the membership endpoints
// (storage/cluster's Membership); web checks the joiner's proof and maps
// the answers to HTTP.
type Cluster interface {
	// Token is the cluster token a joiner must prove it knows.
	Token() []byte
	// Admit admits a member (or a replica) and returns what it needs to
	// start; an error matching clusterapi.ErrMemberExists answers 409.
	Admit(ctx context.Context, req clusterapi.JoinRequest) (clusterapi.JoinResponse, error)
	// Status reports the members.
	Status(ctx context.Context) (clusterapi.Status, error)
	// Remove removes a member by name; clusterapi.ErrNoSuchMember answers
	// 404, ErrNoQuorum 503 with its message, which says what to do, and
	// ErrTryAgain (no leader yet) 503 with Retry-After.
	Remove(ctx context.Context, name string) error
}

// clusterJoinMaxAge bounds how long one join may take on the server.
const clusterJoinMaxAge = 2 * time.Minute

// serveCluster answers the membership endpoints.
func (s *Server) serveCluster(rc *fasthttp.RequestCtx, p string) {
	c := s.cluster
	ctx, cancel := context.WithTimeout(context.Background(), clusterJoinMaxAge)
	defer cancel()
	switch {
	case p == clusterJoinPath:
		if !rc.IsPost() {
			s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
			return
		}
		s.serveClusterJoin(ctx, rc)
	case p == clusterPath:
		if !rc.IsGet() {
			s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
			return
		}
		st, err := c.Status(ctx)
		if err != nil {
			s.api.WriteError(rc, apierrors.NewServiceUnavailable(err.Error()))
			return
		}
		writeJSON(rc, st)
	case strings.HasPrefix(p, clusterMembersPath):
		name := strings.TrimPrefix(p, clusterMembersPath)
		if !rc.IsDelete() {
			s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
			return
		}
		if err := c.Remove(ctx, name); err != nil {
			if errors.Is(err, clusterapi.ErrNoSuchMember) {
				s.api.WriteError(rc, apierrors.NewNotFound(schema.GroupResource{Group: "leasehold.dev", Resource: "members"}, name))
				return
			}
			if errors.Is(err, clusterapi.ErrTryAgain) {
				s.api.WriteError(rc, tryAgain(err))
				return
			}
			if errors.Is(err, clusterapi.ErrNoQuorum) {
				s.api.WriteError(rc, apierrors.NewServiceUnavailable(err.Error()))
				return
			}
			s.api.WriteError(rc, apierrors.NewInternalError(err))
			return
		}
		writeJSON(rc, map[string]string{"removed": name})
	default:
		notFound(rc)
	}
}

// serveClusterJoin checks the joiner's proof and admits it. Off loopback
// the handshake needs TLS: its keying material is what binds the proofs.
func (s *Server) serveClusterJoin(ctx context.Context, rc *fasthttp.RequestCtx) {
	var ekm []byte
	if st := rc.TLSConnectionState(); st != nil {
		var err error
		if ekm, err = st.ExportKeyingMaterial(clusterapi.EKMLabel, nil, clusterapi.EKMLength); err != nil {
			s.api.WriteError(rc, apierrors.NewBadRequest("the join handshake needs TLS 1.3 (or 1.2 with extended master secret): "+err.Error()))
			return
		}
	} else if !rc.RemoteIP().IsLoopback() {
		s.api.WriteError(rc, apierrors.NewForbidden(schema.GroupResource{Group: "leasehold.dev", Resource: "members"}, "",
			errors.New("joining over plain HTTP is allowed on loopback only; serve the API over TLS")))
		return
	}
	var req clusterapi.JoinRequest
	if err := json.Unmarshal(rc.PostBody(), &req); err != nil {
		s.api.WriteError(rc, apierrors.NewBadRequest("join request: "+err.Error()))
		return
	}
	want := clusterapi.Proof(s.cluster.Token(), clusterapi.JoinProofLabel, ekm)
	if !hmac.Equal([]byte(req.Proof), []byte(want)) {
		s.log.Warn("A join with a wrong cluster token was refused", "remote", rc.RemoteIP().String(), "member", req.Name)
		s.api.WriteError(rc, apierrors.NewUnauthorized("the cluster token does not match"))
		return
	}
	resp, err := s.cluster.Admit(ctx, req)
	if err != nil {
		switch {
		case errors.Is(err, clusterapi.ErrMemberExists):
			s.api.WriteError(rc, apierrors.NewConflict(schema.GroupResource{Group: "leasehold.dev", Resource: "members"}, req.Name, err))
		case errors.Is(err, clusterapi.ErrTryAgain):
			s.api.WriteError(rc, tryAgain(err))
		default:
			s.api.WriteError(rc, apierrors.NewInternalError(err))
		}
		return
	}
	resp.Proof = clusterapi.Proof(s.cluster.Token(), clusterapi.MemberProofLabel, ekm)
	if req.Replica {
		s.log.Info("Admitted a replica", "replica", req.Name, "remote", rc.RemoteIP().String())
	} else {
		s.log.Info("Admitted a member", "member", req.Name, "peer_url", req.PeerURL, "remote", rc.RemoteIP().String())
	}
	writeJSON(rc, resp)
}

// tryAgain is the 503 of an operation that cannot run yet but will: its
// Retry-After tells "leasehold cluster remove" and a joiner to try again.
func tryAgain(err error) *apierrors.StatusError {
	se := apierrors.NewServiceUnavailable(err.Error())
	se.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	return se
}

func writeJSON(rc *fasthttp.RequestCtx, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		rc.Error("encode: "+err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	rc.SetContentType("application/json")
	rc.SetBody(data)
}
