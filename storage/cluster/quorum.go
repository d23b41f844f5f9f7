package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// waitable reports whether etcd refused or dropped a membership change
// for a reason that passes by itself while a quorum answers: no leader
// (an election under way), a request lost with a leader that died, or
// etcd's own check that the member has been connected to a quorum for a
// while (a member just stopped or started).
func waitable(err error) bool {
	return electionUnderWay(err) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost) || errors.Is(err, rpctypes.ErrUnhealthy)
}

// electionUnderWay reports an answer that a member gives while it has no
// raft leader, or while the one it had is replaced: the read was not
// answered, and a new leader answers it when sent again (the backup's
// barrier waits these out; membership changes, waitable, more).
func electionUnderWay(err error) bool {
	for _, e := range []error{rpctypes.ErrNoLeader, rpctypes.ErrGRPCNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrGRPCLeaderChanged,
		rpctypes.ErrTimeout, rpctypes.ErrGRPCTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrGRPCTimeoutDueToLeaderFail} {
		if errors.Is(err, e) {
			return true
		}
	}
	desc := rpctypes.ErrorDesc(err)
	return desc == rpctypes.ErrNoLeader.Error() || desc == rpctypes.ErrLeaderChanged.Error()
}

// errLeaderSilent is the cause of a removal not sent: the leader this
// member follows does not answer.
type errLeaderSilent struct{ name string }

func (e errLeaderSilent) Error() string { return "the leader " + e.name + " does not answer" }

// leaderSilent fails a removal at once (removalBlocked) when the raft
// leader this member follows does not answer a status request within a
// second: right after the leader's member died, the others still follow
// it until their election timeout, and a removal sent to it would only
// time out.
func (m *Member) leaderSilent(ctx context.Context, name string, target *membership.Member) error {
	lead := m.etcd.Server.Leader()
	if lead == 0 || lead == m.etcd.Server.MemberID() {
		return nil
	}
	mem := m.etcd.Server.Cluster().Member(lead)
	if mem == nil || len(mem.ClientURLs) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := m.client.Status(sctx, mem.ClientURLs[0]); err == nil {
		return nil
	}
	return m.removalBlocked(ctx, name, target, errLeaderSilent{name: mem.Name})
}

// removalBlocked says truthfully why target (asked for as name) was not
// removed, or a replica (target nil) not revoked; cause is etcd's error
// (nil when this member knows no leader).
// Without a quorum of voting members answering, or when the removal
// would leave the others without one, it fails with ErrNoQuorum and what
// to do. When a quorum answers, what is missing passes by itself (an
// election right after the leader's member died, etcd's health wait):
// it fails with ErrTryAgain, and "leasehold cluster remove" waits.
func (m *Member) removalBlocked(ctx context.Context, name string, target *membership.Member, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	var voters, up int
	var answer, silent []string
	targetVoter, targetUp := false, false
	if st, err := m.Status(ctx); err == nil {
		for _, ms := range st.Members {
			if ms.Learner {
				continue
			}
			voters++
			// A member that answers at all is up, leader or not.
			answered := ms.RaftTerm != 0
			if answered {
				up++
				answer = append(answer, ms.Name)
			} else {
				silent = append(silent, ms.Name)
			}
			if target != nil && ms.ID == target.ID.String() {
				targetVoter, targetUp = true, answered
			}
		}
	}
	who := listOrNone(answer) + plural(len(answer), " answers", " answer")
	if len(silent) > 0 {
		who += "; " + strings.Join(silent, ", ") + plural(len(silent), " does not", " do not")
	}
	if quorum := voters/2 + 1; up < quorum {
		return fmt.Errorf("cluster: cannot remove %s: %w: %d of %d voting members are reachable and a quorum needs %d (%s), "+
			"and etcd changes its membership only with a quorum. Start enough of the stopped members again "+
			"(each with its data directory) to restore the quorum, then remove the dead ones; "+
			"if a majority is lost for good, stop the survivor with the most data and run "+
			"'leasehold cluster reset --data-dir DIR' on it (docs/cluster.md, \"Recovering from a lost quorum\")", name, ErrNoQuorum, up, voters, quorum, who)
	}
	remaining, remainingUp := voters, up
	if targetVoter {
		remaining--
		if targetUp {
			remainingUp--
		}
	}
	if need := remaining/2 + 1; remaining > 0 && remainingUp < need {
		return fmt.Errorf("cluster: cannot remove %s: %w after it: %d of the %d other voting members answer and a quorum of them needs %d (%s), "+
			"and etcd refuses a removal that leaves the cluster without one. Start the stopped members first, then remove %s",
			name, ErrNoQuorum, remainingUp, remaining, need, who, name)
	}
	var why string
	var gone errLeaderSilent
	switch {
	case errors.As(cause, &gone):
		why = fmt.Sprintf("%s (it may just have died): %d of %d voting members answer (%s), enough for a quorum of %d, and elect a new one",
			gone, up, voters, who, voters/2+1)
	case cause == nil || m.etcd.Server.Leader() == 0 || errors.Is(cause, rpctypes.ErrNoLeader):
		why = fmt.Sprintf("no raft leader yet: %d of %d voting members answer (%s), enough for a quorum of %d, and are electing one", up, voters, who, voters/2+1)
	case errors.Is(cause, rpctypes.ErrUnhealthy):
		why = fmt.Sprintf("etcd changes membership only once this member has been connected to a quorum for 5s (a member just stopped or started; %s)", who)
	default:
		why = fmt.Sprintf("the removal did not complete within %s (%v), as when the leader it went to has just died (%s)", removeTimeout, cause, who)
	}
	return fmt.Errorf("cluster: cannot remove %s yet (%w): %s", name, clusterapi.ErrTryAgain, why)
}

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
