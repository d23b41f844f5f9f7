package clusterapi

import (
	"errors"
	"time"
)

// Member is one member as GET StatusPath reports it.
type Member struct {
	Name       string   `json:"name"`
	ID         string   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	Learner    bool     `json:"learner"`
	Leader     bool     `json:"leader"`
	Healthy    bool     `json:"healthy"`
	RaftIndex  uint64   `json:"raftIndex"`
	RaftTerm   uint64   `json:"raftTerm"`
	DBSize     int64    `json:"dbSizeBytes"`
	Error      string   `json:"error,omitempty"`
	// Stale, on a learner that does not answer, says for how long, and
	// when the etcd leader's member removes it.
	Stale *StaleLearner `json:"stale,omitempty"`
}

// StaleLearner is a learner that does not answer: added by a join whose
// joiner never started it (NeverStarted: it has no name or client URL
// yet), or started and lost before its promotion. etcd admits one learner
// at a time, so it blocks every later join until it is removed.
type StaleLearner struct {
	NeverStarted bool `json:"neverStarted"`
	// UnreachableSeconds is how long the answering member has seen it so.
	UnreachableSeconds int64 `json:"unreachableSeconds"`
	// RemovedAfterSeconds is the bound past which the etcd leader's member
	// removes it (--cluster-stale-learner-after).
	RemovedAfterSeconds int64 `json:"removedAfterSeconds"`
}

// Status is GET StatusPath: the cluster as the answering member sees it.
type Status struct {
	Self    string   `json:"self"`
	Leader  string   `json:"leader"` // the etcd leader's name ("" while none)
	Members []Member `json:"members"`
	// ElectionController is the member (or replica) running the election
	// controller, ElectionControllerID its election identity
	// ("name/pid/nonce"); empty while none does or when unknown.
	ElectionController   string `json:"electionController"`
	ElectionControllerID string `json:"electionControllerID,omitempty"`
	// ElectionControllerUnknown, when set, says why the answering member
	// cannot tell who runs the controller: it is read linearizably, which
	// a member without a quorum cannot do.
	ElectionControllerUnknown string `json:"electionControllerUnknown,omitempty"`
	// SlowLeader, when set, is the answering member's finding that the
	// etcd leader's commits are slow while a healthier member answers
	// (move it with POST LeaderPath).
	SlowLeader *SlowLeader `json:"slowLeader,omitempty"`
	// QuorumRoundTripMs is the answering member's last quorum round trip
	// (a linearizable read through the leader), in milliseconds; absent
	// before the first probe.
	QuorumRoundTripMs int64 `json:"quorumRoundTripMs,omitempty"`
	// Certificates are the newest certificate of every member and
	// replica, from the cluster's record.
	Certificates []Certificate `json:"certificates,omitempty"`
	// RotateCertsRequestedAt is the last rotate-certs' time.
	RotateCertsRequestedAt time.Time `json:"rotateCertsRequestedAt,omitzero"`
	// CA is the cluster CA and its last rotation (rotate-ca).
	CA *CAStatus `json:"ca,omitempty"`
}

// SlowLeader is a member's finding that the etcd leader is slow: its
// quorum round trip through the leader is long while another member
// answers it several times faster than the leader does.
type SlowLeader struct {
	Leader               string `json:"leader"`
	QuorumRoundTripMs    int64  `json:"quorumRoundTripMs"`
	LeaderRoundTripMs    int64  `json:"leaderRoundTripMs"`
	Healthier            string `json:"healthier"`
	HealthierRoundTripMs int64  `json:"healthierRoundTripMs"`
	SinceSeconds         int64  `json:"sinceSeconds"`
}

// MoveLeaderRequest is POST LeaderPath: the member to lead ("" lets the
// answering member pick the healthiest other one).
type MoveLeaderRequest struct {
	To string `json:"to"`
}

// MoveLeaderResponse answers POST LeaderPath once the new leader leads.
type MoveLeaderResponse struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// BarrierRevisionHeader, on a member's backup (GET /leasehold/v1/backup),
// is the revision of the linearizable read the member made before its
// snapshot: every write acknowledged before the backup began is at or
// below it, so a snapshot below it misses some, and the client refuses it.
const BarrierRevisionHeader = "Leasehold-Barrier-Revision"

// The errors of the membership operations; each picks the HTTP status of
// the answer (409, 404, 503, 503 with Retry-After), and the message is the wrapping error's.
var (
	// ErrMemberExists refuses a joiner whose name or peer URL is in use.
	ErrMemberExists = errors.New("member exists")
	// ErrNoSuchMember answers the removal of an unknown member.
	ErrNoSuchMember = errors.New("no such member")
	// ErrNoQuorum refuses a removal while the cluster has no quorum: etcd
	// changes its membership only through raft, which needs one.
	ErrNoQuorum = errors.New("the cluster has no quorum")
	// ErrTryAgain answers an operation that cannot run yet but will
	// (503 with Retry-After): a removal while the members elect a leader,
	// a join while another learner is in the way.
	ErrTryAgain = errors.New("try again shortly")
)
