package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// Membership is a running member's side of the membership endpoints,
// which web serves over HTTP: admitting joiners (the member's half of the
// join handshake), the cluster's status, and removing members.
type Membership struct {
	p *Provisioned
	m *Member
	// electionLeader is the identity ("name/pid/nonce") of the server that
	// runs the election controller, "" while none does.
	electionLeader func(ctx context.Context) (string, error)
}

// NewMembership is the membership of member m, provisioned as p;
// electionLeader reports which server runs the election controller.
func NewMembership(p *Provisioned, m *Member, electionLeader func(ctx context.Context) (string, error)) *Membership {
	return &Membership{p: p, m: m, electionLeader: electionLeader}
}

// Token is the cluster token a joiner must prove it knows.
func (s *Membership) Token() []byte { return s.p.token }

// Status is the members and which server runs the election controller
// (unknown when it cannot be read within a second).
func (s *Membership) Status(ctx context.Context) (clusterapi.Status, error) {
	st, err := s.m.Status(ctx)
	if err != nil {
		return st, err
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if id, err := s.electionLeader(lctx); err != nil {
		st.ElectionControllerUnknown = err.Error()
	} else if id != "" {
		st.ElectionControllerID = id
		st.ElectionController, _, _ = strings.Cut(id, "/")
	}
	return st, nil
}

// HasLeader reports whether this member knows a raft leader now (for
// /metrics).
func (s *Membership) HasLeader() bool { return s.m.HasLeader() }

// Remove removes the member called name; its errors match
// clusterapi.ErrNoSuchMember and ErrNoQuorum (Member.Remove).
func (s *Membership) Remove(ctx context.Context, name string) error {
	return s.m.Remove(ctx, name)
}

// Admit issues a joiner's certificate from the cluster CA and adds it as
// a learner, or gives a replica its client certificate. The caller has
// checked the joiner's proof of the token.
func (s *Membership) Admit(ctx context.Context, req clusterapi.JoinRequest) (clusterapi.JoinResponse, error) {
	var out clusterapi.JoinResponse
	if !memberName.MatchString(req.Name) {
		return out, fmt.Errorf("invalid member name %q", req.Name)
	}
	if req.Replica {
		return s.admitReplica(req.Name)
	}
	for _, raw := range []string{req.PeerURL, req.ClientURL} {
		if u, err := url.Parse(raw); err != nil || u.Scheme != "https" || u.Port() == "" {
			return out, fmt.Errorf("invalid member URL %q: want https://host:port", raw)
		}
	}
	ca, caCert, caKey, err := s.authority()
	if err != nil {
		return out, err
	}
	cert, key, err := ca.IssuePeer(req.Name, req.Hosts)
	if err != nil {
		return out, err
	}
	ad, err := s.m.AddLearner(ctx, req.Name, req.PeerURL)
	if errors.Is(err, ErrMemberExists) {
		return out, fmt.Errorf("%w: %w", clusterapi.ErrMemberExists, err)
	}
	if err != nil {
		return out, err
	}
	return clusterapi.JoinResponse{CACert: string(caCert), CAKey: string(caKey), Cert: string(cert), Key: string(key),
		InitialCluster: ad.InitialCluster, ClientURLs: ad.ClientURLs}, nil
}

// admitReplica issues an API-only replica a client certificate for the
// members' client listeners. It gets the CA's certificate to verify the
// members, not its key: a replica admits nobody.
func (s *Membership) admitReplica(name string) (clusterapi.JoinResponse, error) {
	ca, caCert, _, err := s.authority()
	if err != nil {
		return clusterapi.JoinResponse{}, err
	}
	// A year's certificate would cut the replica off the members a year
	// later: nothing renews it (the members' own are as long-lived).
	cert, key, err := ca.IssueLongLivedClient(name, nil)
	if err != nil {
		return clusterapi.JoinResponse{}, err
	}
	return clusterapi.JoinResponse{CACert: string(caCert), Cert: string(cert), Key: string(key),
		ClientURLs: s.m.ClientURLs(), EtcdPrefix: s.p.prefix}, nil
}

// authority loads the cluster CA every member keeps.
func (s *Membership) authority() (*pki.Authority, []byte, []byte, error) {
	caCert, err := os.ReadFile(s.p.paths.CAFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cluster CA: %w", err)
	}
	caKey, err := os.ReadFile(s.p.paths.CAKeyFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cluster CA key: %w", err)
	}
	ca, err := pki.ParseAuthority(caCert, caKey)
	return ca, caCert, caKey, err
}
