package web

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"strconv"
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
	// MoveLeader hands the raft leadership to the member called to (""
	// picks the healthiest other one); clusterapi.ErrNoSuchMember answers
	// 404, ErrInvalidRequest 400 and ErrTryAgain 503 with Retry-After.
	MoveLeader(ctx context.Context, to string) (clusterapi.MoveLeaderResponse, error)
}

// clusterJoinMaxAge bounds how long one join may take on the server.
const clusterJoinMaxAge = 2 * time.Minute

// serveCluster answers the membership endpoints.
func (s *Server) serveCluster(rc *fasthttp.RequestCtx, p string) {
	c := s.cluster
	ctx, cancel := context.WithTimeout(context.Background(), clusterJoinMaxAge)
	defer cancel()
	if s.serveClusterRotation(ctx, rc, p) {
		return
	}
	switch {
	case p == clusterapi.JoinNoncePath:
		if !rc.IsPost() {
			s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
			return
		}
		s.serveJoinNonce(rc)
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
	case p == clusterapi.LeaderPath:
		if !rc.IsPost() {
			s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
			return
		}
		var req clusterapi.MoveLeaderRequest
		if body := rc.PostBody(); len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				s.api.WriteError(rc, apierrors.NewBadRequest("invalid move-leader request: "+err.Error()))
				return
			}
		}
		resp, err := c.MoveLeader(ctx, req.To)
		switch {
		case errors.Is(err, clusterapi.ErrNoSuchMember):
			s.api.WriteError(rc, apierrors.NewNotFound(membersResource, req.To))
		case errors.Is(err, clusterapi.ErrInvalidRequest):
			s.api.WriteError(rc, apierrors.NewBadRequest(err.Error()))
		case errors.Is(err, clusterapi.ErrTryAgain):
			s.api.WriteError(rc, tryAgain(err))
		case err != nil:
			s.api.WriteError(rc, apierrors.NewServiceUnavailable(err.Error()))
		default:
			writeJSON(rc, resp)
		}
	case strings.HasPrefix(p, clusterMembersPath):
		name := strings.TrimPrefix(p, clusterMembersPath)
		if !rc.IsDelete() {
			s.api.WriteError(rc, apiserver.ErrMethodNotAllowed)
			return
		}
		if err := c.Remove(ctx, name); err != nil {
			if errors.Is(err, clusterapi.ErrNoSuchMember) {
				s.api.WriteError(rc, apierrors.NewNotFound(membersResource, name))
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

// serveJoinNonce hands a joiner the challenge its proof must cover.
func (s *Server) serveJoinNonce(rc *fasthttp.RequestCtx) {
	nonce, err := s.join.nonces.Issue()
	if err != nil {
		s.joinRefused(rc, err.Error(), "")
		s.api.WriteError(rc, apierrors.NewTooManyRequests("Too many cluster joins under way, please try again later.", 1))
		return
	}
	writeJSON(rc, clusterapi.NonceResponse{Nonce: nonce, ExpiresInSeconds: int(s.join.nonces.TTL() / time.Second)})
}

// serveClusterJoin checks the joiner's request and proof and admits it.
// Off loopback the handshake needs TLS: its keying material is what binds
// the proofs to the session. Each check refuses before the next runs, and
// none but the last changes anything: the request's shape and bounds
// (before any of it is logged), its nonce (once only), its proof, then
// the member's Admit.
func (s *Server) serveClusterJoin(ctx context.Context, rc *fasthttp.RequestCtx) {
	var ekm []byte
	if st := rc.TLSConnectionState(); st != nil {
		var err error
		if ekm, err = st.ExportKeyingMaterial(clusterapi.EKMLabel, nil, clusterapi.EKMLength); err != nil {
			s.joinRefused(rc, "TLS without exportable keying material", "")
			s.api.WriteError(rc, apierrors.NewBadRequest("the join handshake needs TLS 1.3 (or 1.2 with extended master secret): "+err.Error()))
			return
		}
	} else if !rc.RemoteIP().IsLoopback() {
		s.joinRefused(rc, "plain HTTP off loopback", "")
		s.api.WriteError(rc, apierrors.NewForbidden(membersResource, "",
			errors.New("joining over plain HTTP is allowed on loopback only; serve the API over TLS")))
		return
	}
	body := rc.PostBody()
	if len(body) > clusterapi.MaxJoinBodyBytes {
		s.joinRefused(rc, "body of "+strconv.Itoa(len(body))+" bytes", "")
		s.api.WriteError(rc, apierrors.NewRequestEntityTooLargeError("a join request is at most "+strconv.Itoa(clusterapi.MaxJoinBodyBytes)+" bytes"))
		return
	}
	var req clusterapi.JoinRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.joinRefused(rc, "undecodable body", "")
		s.api.WriteError(rc, apierrors.NewBadRequest("join request: the body is not a JSON join request"))
		return
	}
	if err := req.Validate(); err != nil {
		s.joinRefused(rc, err.Error(), "")
		s.api.WriteError(rc, apierrors.NewBadRequest(err.Error()))
		return
	}
	// From here on req.Name is known to be a short valid name.
	if !s.join.nonces.Consume(req.Nonce) {
		s.joinRefused(rc, "unknown, expired or used nonce (a replay?)", req.Name)
		s.api.WriteError(rc, apierrors.NewUnauthorized("the join's nonce is unknown, expired or already used (a replayed join is refused): "+
			"ask POST "+clusterapi.JoinNoncePath+" for a fresh one and use it at once"))
		return
	}
	token := s.cluster.Token()
	if !hmac.Equal([]byte(req.Proof), []byte(clusterapi.JoinProof(token, ekm, &req))) {
		s.joinRefused(rc, "proof does not verify (wrong cluster token?)", req.Name)
		s.api.WriteError(rc, apierrors.NewUnauthorized("the join's proof does not verify: the joiner's cluster token differs from this cluster's (a token of another cluster?), or the request was altered"))
		return
	}
	resp, err := s.cluster.Admit(ctx, req)
	if err != nil {
		switch {
		case errors.Is(err, clusterapi.ErrInvalidRequest):
			s.joinRefused(rc, err.Error(), req.Name)
			s.api.WriteError(rc, apierrors.NewBadRequest(err.Error()))
		case errors.Is(err, clusterapi.ErrMemberExists):
			s.joinRefused(rc, "name in use", req.Name)
			s.api.WriteError(rc, apierrors.NewConflict(membersResource, req.Name, err))
		case errors.Is(err, clusterapi.ErrTryAgain):
			s.api.WriteError(rc, tryAgain(err))
		default:
			s.api.WriteError(rc, apierrors.NewInternalError(err))
		}
		return
	}
	resp.Proof = clusterapi.MemberProof(token, ekm, &req, &resp)
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

// membersResource names the cluster's members in Status errors.
var membersResource = schema.GroupResource{Group: "leasehold.dev", Resource: "members"}

func writeJSON(rc *fasthttp.RequestCtx, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		rc.Error("encode: "+err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	rc.SetContentType("application/json")
	rc.SetBody(data)
}
