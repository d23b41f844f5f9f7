package cluster

import (
	"context"
	"crypto"
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
// It starts the member's watch of the raft leadership (leadership.go),
// which moves a slow leader by itself when moveSlowLeader is set.
func NewMembership(p *Provisioned, m *Member, electionLeader func(ctx context.Context) (string, error), moveSlowLeader bool) *Membership {
	m.WatchLeadership(electionLeader, moveSlowLeader)
	return &Membership{p: p, m: m, electionLeader: electionLeader}
}

// Token is the cluster token a joiner must prove it knows: the one the
// cluster's record holds (a removal rotates it), or for a cluster created
// before the record kept it, the member's own.
func (s *Membership) Token() []byte {
	if t := s.m.Token(); len(t) > 0 {
		return t
	}
	return s.p.token
}

// Status is the members and which server runs the election controller
// (unknown when it cannot be read within a second).
func (s *Membership) Status(ctx context.Context) (clusterapi.Status, error) {
	st, err := s.m.Status(ctx)
	if err != nil {
		return st, err
	}
	st.SlowLeader = s.m.Slow()
	st.QuorumRoundTripMs = s.m.QuorumRoundTrip().Milliseconds()
	st.Certificates = s.Certificates()
	ca := s.CAStatus()
	st.CA = &ca
	s.m.gate.mu.RLock()
	st.RotateCertsRequestedAt = s.m.gate.rotateAt
	s.m.gate.mu.RUnlock()
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

// LeaderSlow reports, for /metrics, whether this member finds the raft
// leader slow while a healthier member answers, and its last quorum round
// trip (leadership.go).
func (s *Membership) LeaderSlow() (slow bool, quorumRoundTrip time.Duration) {
	return s.m.Slow() != nil, s.m.QuorumRoundTrip()
}

// MoveLeader hands the raft leadership to the member called to, or to the
// healthiest other one when to is "" (Member.MoveLeader).
func (s *Membership) MoveLeader(ctx context.Context, to string) (clusterapi.MoveLeaderResponse, error) {
	from, got, err := s.m.MoveLeader(ctx, to)
	return clusterapi.MoveLeaderResponse{From: from, To: got}, err
}

// Remove removes the member called name, or revokes the replica called
// name when no member is (Member.Remove, Member.Revoke); its errors match
// clusterapi.ErrNoSuchMember and ErrNoQuorum.
func (s *Membership) Remove(ctx context.Context, name string) error {
	if !s.m.isMember(name) && s.m.gate.names(KindReplica)[name] {
		return s.m.Revoke(ctx, name)
	}
	return s.m.Remove(ctx, name)
}

// Admit signs a joiner's certificate request with the cluster CA and adds
// it as a learner, or signs a replica's client certificate. The caller has
// checked the joiner's proof of the token. Nothing changes unless every
// check passes: the certificate is signed before the learner is added, and
// a refusal (an error matching clusterapi.ErrInvalidRequest) adds none.
func (s *Membership) Admit(ctx context.Context, req clusterapi.JoinRequest) (clusterapi.JoinResponse, error) {
	var out clusterapi.JoinResponse
	if err := req.ValidateAdmission(); err != nil {
		return out, err
	}
	csr, err := pki.ParseCSR([]byte(req.CSR))
	if err != nil {
		return out, fmt.Errorf("%w: csr: %w", clusterapi.ErrInvalidRequest, err)
	}
	if csr.Subject.CommonName != req.Name {
		return out, fmt.Errorf("%w: csr is not for the name the request gives", clusterapi.ErrInvalidRequest)
	}
	if err := s.nameTaken(req.Name, req.Replica); err != nil {
		return out, err
	}
	if req.Replica {
		return s.admitReplica(ctx, req.Name, csr.PublicKey)
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
	// The names come from the request the proof covers, not from the
	// CSR: the member decides what the certificate says.
	cert, err := ca.SignPeer(req.Name, req.Hosts, csr.PublicKey, s.p.validity)
	if err != nil {
		return out, err
	}
	// The certificate is admitted before the learner is added: a learner
	// asks the voting members for its promotion with it.
	fp, err := recordCredential(ctx, s.m.client, cert, KindMember, req.Name)
	if err != nil {
		return out, err
	}
	ad, err := s.m.AddLearner(ctx, req.Name, req.PeerURL)
	if err != nil {
		if _, derr := s.m.client.Delete(context.WithoutCancel(ctx), credentialsPrefix+fp); derr != nil {
			s.m.log.Warn("The credential of a join that failed stays recorded", "member", req.Name, "err", derr)
		}
	}
	if errors.Is(err, ErrMemberExists) {
		return out, fmt.Errorf("%w: %w", clusterapi.ErrMemberExists, err)
	}
	if err != nil {
		return out, err
	}
	return clusterapi.JoinResponse{CACert: string(caCert), CAKey: string(caKey), Cert: string(cert),
		InitialCluster: ad.InitialCluster, ClientURLs: ad.ClientURLs}, nil
}

// nameTaken refuses a name the other kind of device holds: one name, one
// kind of device, so that "cluster remove NAME" never hits a member when
// a replica was meant, or the other way round.
func (s *Membership) nameTaken(name string, replica bool) error {
	if replica && s.m.isMember(name) {
		return fmt.Errorf("a member is called %q: %w", name, clusterapi.ErrMemberExists)
	}
	if !replica && s.m.gate.names(KindReplica)[name] {
		return fmt.Errorf("a replica is called %q: %w", name, clusterapi.ErrMemberExists)
	}
	return nil
}

// admitReplica signs an API-only replica's client certificate for the
// members' client listeners. It gets the CA's certificate to verify the
// members, not its key: a replica admits nobody.
func (s *Membership) admitReplica(ctx context.Context, name string, pub crypto.PublicKey) (clusterapi.JoinResponse, error) {
	ca, caCert, _, err := s.authority()
	if err != nil {
		return clusterapi.JoinResponse{}, err
	}
	// It lasts as long as the members' own, and the replica renews it
	// through a member (renew.go).
	cert, err := ca.SignClient(name, nil, pub, s.p.validity)
	if err != nil {
		return clusterapi.JoinResponse{}, err
	}
	if _, err := recordCredential(ctx, s.m.client, cert, KindReplica, name); err != nil {
		return clusterapi.JoinResponse{}, err
	}
	return clusterapi.JoinResponse{CACert: string(caCert), Cert: string(cert),
		ClientURLs: s.m.ClientURLs(), EtcdPrefix: s.p.prefix}, nil
}

// authority loads the cluster CA every member keeps (with its chain,
// after a CA rotation the record holds: carotate.go), its trust file
// and its key.
func (s *Membership) authority() (*pki.Authority, []byte, []byte, error) {
	if err := s.m.syncCA(); err != nil {
		return nil, nil, nil, err
	}
	ca, err := loadCA(s.p.paths)
	if err != nil {
		return nil, nil, nil, err
	}
	caCert, err := os.ReadFile(s.p.paths.CAFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cluster CA: %w", err)
	}
	return ca, caCert, ca.KeyPEM, nil
}

// GeneratedToken is the file of the cluster token this start generated
// (--cluster-init without one), "" when it was given or stored: the server
// then says how to join, naming the file, never its contents.
func (s *Membership) GeneratedToken() string { return s.p.GeneratedToken() }
