package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/storage/etcd"
)

// Where the raft leader runs, how fast it is replaced, and what a member
// does about a leader that is alive but slow.
//
// Timing. etcd's defaults (a 100 ms heartbeat, a 1 s election timeout)
// suit a data centre where a member may stall behind a busy disk. raft
// randomizes each follower's timeout in [E, 2E), so after the leader's
// member dies the survivors elect a new one 1-2 s later, and the next
// write waits for that. The members of a leasehold cluster are a few
// devices on one LAN: a 700 ms election timeout (7 heartbeats) elects
// within 0.7-1.4 s. Pre-vote (etcd's default, set here explicitly) keeps
// a member that missed heartbeats from deposing a leader the others still
// hear: a spurious election needs the leader itself to stall for the whole
// timeout. The etcd leases behind the election controller are extended by
// one election timeout when a new leader takes over (etcd's lessor), which
// this shortens too.
//
// Placement. The election controller's lease lives in etcd: when the
// member running the controller is also the raft leader, one crash costs
// an election, the lessor's extension of every lease on the new leader
// (a full TTL from then) and the lease's own expiry: 5.6-6.3 s measured.
// A member that runs the controller while it leads etcd therefore hands
// the raft leadership to another healthy member (MoveLeader, milliseconds);
// a crash then costs the lease's remaining TTL alone (2.3-3.2 s). It does
// so once every voter has answered its probes for a while
// (placementSettled), at most once per placementCooldown, so that two
// such members cannot toss leadership back and forth.
//
// Sick leaders. A leader whose link is throttled (not cut) still sends its
// heartbeats, so nobody deposes it, while its commits crawl: the issue's
// trial saw no write complete for 33 s. Every member probes, twice a
// second, the quorum round trip through its own etcd (a linearizable
// read of a key never written: a ReadIndex round through the leader, no
// disk write) and every voting member's status over its client port (one
// kept connection each). A follower calls the leader slow when its quorum
// round trip exceeds slowQuorumRoundTrip while another follower answers it
// at least slowRatio times faster than the leader does: then the trouble
// is between it and the leader, not its own link (every other member
// would be slow too) nor load on the machine (which slows every member
// alike). slowAfter such probes in a row raise it (logged, the
// leasehold_cluster_leader_slow gauge, `cluster status`), as many healthy
// ones clear it. `leasehold cluster move-leader` moves the leadership; with
// Config.MoveSlowLeader the healthy follower of the lowest ID moves it off
// the leader at once (the others moveSlowOthersAfter later, should it
// still lead), at most once per moveCooldown.
//
// A move off a slow leader is an election among the healthy members, not
// raft's leadership transfer (electOffSlow): a transfer waits until the
// transferee holds the leader's whole log, and off a throttled link that
// took 0.7-24 s while the leader admitted no write.

const (
	raftHeartbeat = 100 * time.Millisecond
	raftElection  = 700 * time.Millisecond

	// probeEvery is how often a member probes the leadership.
	probeEvery = 500 * time.Millisecond
	// leaderProbeTimeout bounds one probe: a probe that times out counts as
	// taking that long. Over slowQuorumRoundTrip (a probe still waiting
	// then has already found the leader slow) and near probeEvery, so
	// that the probes of a slow leader come every 0.6 s.
	leaderProbeTimeout = 600 * time.Millisecond
	// slowQuorumRoundTrip is the quorum round trip above which a follower
	// suspects the leader; a healthy LAN cluster under load takes
	// milliseconds to tens of milliseconds (240-250 ms at most beside 4
	// CPU burners on a 2-core machine).
	slowQuorumRoundTrip = 500 * time.Millisecond
	// slowRatio is how many times faster than the leader another follower
	// must answer for the leader to be the slow one.
	slowRatio = 4
	// slowAfter probes in a row raise (or clear) the verdict: 1.5-1.8 s
	// of a slow leader.
	slowAfter = 3
	// moveSlowOthersAfter is how long the leader must have been slow
	// before a follower other than the first (the healthy follower of the
	// lowest ID, which moves at the verdict) moves it
	// (Config.MoveSlowLeader): raft lets two members that stand for
	// election at once split the vote, and the first one's election
	// takes well under this.
	moveSlowOthersAfter = 3 * time.Second
	// electTimeout bounds the election of a move off a slow leader: two
	// election timeouts and more (when this member's log is behind the
	// other follower's, that one wins at its own election timeout,
	// 0.7-1.4 s later).
	electTimeout = 4 * raftElection
	// moveTimeout bounds one move of the leadership by a transfer. A
	// transfer off a throttled leader waits until the appends queued for
	// a transferee have drained (moveLeaderTo): 0.7-24 s measured on a
	// 96 kbit link (the leader's writes stalled all along). `leasehold
	// cluster move-leader` ends its move at its --timeout (30 s by
	// default).
	moveTimeout = 40 * time.Second
	// moveCooldown spaces a member's automatic moves of a slow leader.
	moveCooldown = time.Minute
	// placementCooldown spaces a member's moves away from the election
	// controller.
	placementCooldown = 10 * time.Second
	// placementSettled is how many probes in a row (10 s of them) must
	// find every voter healthy before the leadership moves away from the
	// controller: with a member down, the two left are a quorum only
	// together, so the move would gain nothing, and a member that
	// restarts is spared a leader change during its first writes (a
	// server whose engine cannot create its namespaces at start exits)
	// and a healed one its catch-up (with 5 s of probes, a healed
	// member's first write came 10-13 s after the heal, 1.5-4.3 s without
	// the move).
	placementSettled = int(10 * time.Second / probeEvery)
)

// raftTiming sets etcd's heartbeat and election timeout (see above).
func raftTiming(ec *embed.Config) {
	ec.TickMs = uint(raftHeartbeat / time.Millisecond)
	ec.ElectionMs = uint(raftElection / time.Millisecond)
	ec.PreVote = true
}

// LeaderChanged returns a channel that closes when this member next sees
// a new raft leader (the member's store ends the writes it had sent to
// the old one).
func (m *Member) LeaderChanged() <-chan struct{} { return m.etcd.Server.LeaderChangedNotify() }

// SlowLeader is this member's verdict on the raft leader.
type SlowLeader = clusterapi.SlowLeader

// leadership is a member's view of the raft leadership (see above).
type leadership struct {
	m *Member
	// controller reports who runs the election controller (its identity,
	// "name/pid/nonce"); nil until WatchLeadership.
	controller func(ctx context.Context) (string, error)
	autoMove   bool

	mu      sync.Mutex
	started bool // run runs
	// peers holds one client per voting member's client URL, for the
	// status probes and for MoveLeader on the leader.
	peers map[string]*clientv3.Client
	rtt   map[uint64]time.Duration // last status round trip per member
	// quorumRTT is the last quorum round trip through this member.
	quorumRTT time.Duration
	leader    uint64 // the leader the counts below are about
	sick, ok  int    // probes in a row that found the leader slow, or not
	// settled counts the probes in a row that found every voter healthy.
	settled   int
	slow      *SlowLeader
	slowSince time.Time
	// suspect is the last leader a probe found slow, at suspectedAt;
	// suspected wakes standIn then.
	suspect     uint64
	suspectedAt time.Time
	suspected   chan struct{}
	stoodAt     time.Time // this member's last election off a slow leader
	// lastPlaced is this member's last move away from the election
	// controller, lastSlowMove its last move off a slow leader: apart,
	// since a leader that has just taken over from the controller's
	// member may be the one whose link fails next (seen in the e2e test:
	// the follower that had handed it on sat out its cooldown, and the
	// move waited for the other follower's moveSlowOthersAfter).
	lastPlaced, lastSlowMove time.Time
	moves                    int // moves of a slow leader by this member
}

// WatchLeadership starts the member's probes of the leadership (above):
// controller tells who runs the election controller; autoMove lets the
// member move a slow leader to itself. A second call changes both and
// starts nothing.
func (m *Member) WatchLeadership(controller func(ctx context.Context) (string, error), autoMove bool) {
	select {
	case <-m.done:
		return
	default:
	}
	l := m.leadership
	l.mu.Lock()
	l.controller, l.autoMove = controller, autoMove
	if l.suspected == nil {
		l.suspected = make(chan struct{}, 1)
	}
	started := l.started
	l.started = true
	l.mu.Unlock()
	if !started {
		m.background.Go(l.run)
	}
}

func (l *leadership) run() {
	defer l.closePeers()
	// A move under way ends with the member (Close waits for run).
	base, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-l.m.done:
		case <-base.Done():
		}
		stop()
	}()
	standing := make(chan struct{})
	go func() {
		defer close(standing)
		l.standIn(base)
	}()
	defer func() { <-standing }()
	defer stop()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-l.m.done:
			return
		case <-l.m.etcd.Server.StopNotify():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(base, leaderProbeTimeout+time.Second)
		l.probe(ctx)
		cancel()
		ctx, cancel = context.WithTimeout(base, moveTimeout+time.Second)
		l.place(ctx)
		cancel()
	}
}

// probe measures the quorum round trip and every voter's status round
// trip, and updates the verdict on the leader.
func (l *leadership) probe(ctx context.Context) {
	m := l.m
	srv := m.etcd.Server
	lead := uint64(srv.Leader())
	self := uint64(srv.MemberID())
	voters := voting(srv.Cluster().Members())
	// Both at once: a probe cycle must fit in probeEvery for the verdict
	// to come after slowAfter seconds.
	var quorum time.Duration
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		qctx, cancel := context.WithTimeout(ctx, leaderProbeTimeout)
		defer cancel()
		start := time.Now()
		_, err = m.local.Get(clientv3.WithRequireLeader(qctx), probeKey)
		quorum = time.Since(start)
		if err != nil {
			quorum = max(quorum, leaderProbeTimeout)
		}
	}()
	rtt := l.probePeers(ctx, voters, self)
	<-done

	l.mu.Lock()
	defer l.mu.Unlock()
	l.quorumRTT, l.rtt = quorum, rtt
	l.settled++
	for _, v := range voters {
		if _, ok := rtt[uint64(v.ID)]; !ok || err != nil {
			l.settled = 0
		}
	}
	if lead == 0 {
		// A follower that missed the leader's heartbeats for an election
		// timeout knows no leader while its pre-vote is refused (the
		// others still hear the leader), which a slow leader's followers
		// do now and then: the verdict waits for the outcome.
		return
	}
	if lead != l.leader {
		l.leader, l.sick, l.ok = lead, 0, 0
		l.clearLocked(lead)
	}
	if lead == self {
		return
	}
	var healthier *membership.Member
	leaderRTT, haveLeader := rtt[lead]
	if !haveLeader {
		leaderRTT = leaderProbeTimeout
	}
	for _, v := range voters {
		id := uint64(v.ID)
		if id == lead || id == self {
			continue
		}
		if d, ok := rtt[id]; ok && d*slowRatio < leaderRTT && (healthier == nil || d < rtt[uint64(healthier.ID)]) {
			healthier = v
		}
	}
	if quorum > slowQuorumRoundTrip && healthier != nil {
		l.sick, l.ok = l.sick+1, 0
		l.suspect, l.suspectedAt = lead, time.Now()
		select {
		case l.suspected <- struct{}{}:
		default:
		}
	} else {
		l.sick, l.ok = 0, l.ok+1
	}
	switch {
	case l.slow == nil && l.sick >= slowAfter:
		l.slowSince = time.Now()
		l.slow = &SlowLeader{Leader: memberNameOf(voters, lead), QuorumRoundTripMs: quorum.Milliseconds(),
			LeaderRoundTripMs: leaderRTT.Milliseconds(), Healthier: healthier.Name, HealthierRoundTripMs: rtt[uint64(healthier.ID)].Milliseconds()}
		m.log.Warn("The etcd leader's commits are slow while a healthier member answers: move the leadership with `leasehold cluster move-leader`",
			"leader", l.slow.Leader, "quorum_round_trip", quorum.Round(time.Millisecond), "leader_round_trip", leaderRTT.Round(time.Millisecond),
			"healthier", healthier.Name, "healthier_round_trip", rtt[uint64(healthier.ID)].Round(time.Millisecond), "automatic_move", l.autoMove)
	case l.slow != nil && l.sick > 0:
		l.slow.QuorumRoundTripMs, l.slow.LeaderRoundTripMs = quorum.Milliseconds(), leaderRTT.Milliseconds()
		l.slow.Healthier, l.slow.HealthierRoundTripMs = healthier.Name, rtt[uint64(healthier.ID)].Milliseconds()
	case l.slow != nil && l.ok >= slowAfter:
		l.clearLocked(lead)
	}
	if l.slow != nil {
		l.slow.SinceSeconds = int64(time.Since(l.slowSince) / time.Second)
	}
}

// standIn speeds up an election that follows a slow leader: when this
// member has found the leader slow within standInWindow (one probe
// suffices), lets the members move it (Config.MoveSlowLeader), and has
// seen no leader for leaderlessFor, it stands for election at once
// instead of at its election timeout (0.7-1.4 s), unless it stood within
// electTimeout. That is the case of the healthy follower whose log is
// longer than the first mover's (electOffSlow): it refused that one's
// vote and left the old term, and the slow leader, whose log is the
// longest and who would win an election it stands in, hears of it only
// through its slow link. The other candidate's log is no longer than
// this member's (else this member would have granted its vote), so it
// grants this member's.
func (l *leadership) standIn(ctx context.Context) {
	srv := l.m.etcd.Server
	l.mu.Lock()
	suspected := l.suspected
	l.mu.Unlock()
	var leaderless time.Time
	for {
		l.mu.Lock()
		suspect, at, auto, stood := l.suspect, l.suspectedAt, l.autoMove, l.stoodAt
		l.mu.Unlock()
		wait := standInPoll
		if !auto || time.Since(at) > standInWindow {
			wait, leaderless = standInWindow, time.Time{}
		} else if srv.Leader() != 0 {
			leaderless = time.Time{}
		} else if leaderless.IsZero() {
			leaderless = time.Now()
		} else if time.Since(leaderless) >= leaderlessFor && time.Since(stood) > electTimeout {
			term := srv.Term()
			err := l.standForElection(ctx, suspect, term)
			l.m.log.Warn("Stood for election after the slow etcd leader lost its leadership, with no leader for a while",
				"slow_leader", memberNameOf(srv.Cluster().Members(), suspect), "leaderless", time.Since(leaderless).Round(time.Millisecond), "term", term, "err", err)
			leaderless = time.Time{}
		}
		select {
		case <-ctx.Done():
			return
		case <-suspected:
		case <-time.After(wait):
		}
	}
}

// standForElection makes this member stand for election at once in term
// (ignored by raft if the term is no longer current): its own raft is
// handed the MsgTimeoutNow that lead would send at the end of a
// leadership transfer (see electOffSlow for why that is safe). It
// records when, for standIn's and the moves' cooldowns.
func (l *leadership) standForElection(ctx context.Context, lead, term uint64) error {
	l.mu.Lock()
	l.stoodAt = time.Now()
	l.mu.Unlock()
	srv := l.m.etcd.Server
	return srv.Process(ctx, raftpb.Message{Type: raftpb.MsgTimeoutNow, From: lead, To: uint64(srv.MemberID()), Term: term})
}

const (
	// standInWindow is how long after a probe found the leader slow
	// standIn watches for an election (a verdict takes slowAfter probes,
	// then moveSlowOthersAfter for a second mover).
	standInWindow = 6 * time.Second
	// standInPoll is how often standIn looks for a leader meanwhile.
	standInPoll = 25 * time.Millisecond
	// leaderlessFor is how long standIn waits without a leader: a won
	// election is heard within milliseconds on a LAN.
	leaderlessFor = 200 * time.Millisecond
)

// clearLocked drops the verdict, saying so when there was one.
func (l *leadership) clearLocked(lead uint64) {
	if l.slow == nil {
		return
	}
	l.m.log.Info("The etcd leader is no longer slow", "slow_leader", l.slow.Leader,
		"leader", memberNameOf(l.m.etcd.Server.Cluster().Members(), lead), "slow_for", time.Since(l.slowSince).Round(time.Second))
	l.slow = nil
}

// probePeers asks every voter but self for its status and returns the
// round trips of those that answered healthy (knowing a leader, no
// errors). Self answers in no time: its own etcd.
func (l *leadership) probePeers(ctx context.Context, voters []*membership.Member, self uint64) map[uint64]time.Duration {
	type answer struct {
		id uint64
		d  time.Duration
		ok bool
	}
	answers := make(chan answer, len(voters))
	n := 0
	for _, v := range voters {
		if uint64(v.ID) == self || len(v.ClientURLs) == 0 {
			continue
		}
		c, err := l.peer(v.ClientURLs[0])
		if err != nil {
			continue
		}
		n++
		go func() {
			pctx, cancel := context.WithTimeout(ctx, leaderProbeTimeout)
			defer cancel()
			start := time.Now()
			resp, err := c.Status(pctx, v.ClientURLs[0])
			answers <- answer{id: uint64(v.ID), d: time.Since(start), ok: err == nil && resp.Leader != 0 && len(resp.Errors) == 0}
		}()
	}
	out := map[uint64]time.Duration{self: 0}
	for range n {
		if a := <-answers; a.ok {
			out[a.id] = a.d
		}
	}
	return out
}

// peer is the kept client of a member's client URL.
func (l *leadership) peer(url string) (*clientv3.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.peers[url]; ok {
		return c, nil
	}
	p := l.m.cfg.Paths
	tlsCfg, err := etcd.TLSConfig(p.CAFile, p.CertFile, p.KeyFile)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: tlsCfg, DialTimeout: leaderProbeTimeout,
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: leaderProbeTimeout, Logger: clientLogger(l.m.log)})
	if err != nil {
		return nil, err
	}
	// clientv3's Status(ctx, endpoint) dials a connection of its own for
	// each call and closes it after: a TLS handshake per peer twice a
	// second, which was half of what an idle member allocated (about
	// 1 MB/s). The kept connection answers instead (this client has that
	// one endpoint only).
	c.Maintenance = clientv3.NewMaintenanceFromMaintenanceClient(clientv3.RetryMaintenanceClient(c, c.ActiveConnection()), c)
	if l.peers == nil {
		l.peers = map[string]*clientv3.Client{}
	}
	l.peers[url] = c
	return c, nil
}

func (l *leadership) closePeers() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.peers {
		_ = c.Close()
	}
	l.peers = nil
}

// place moves the raft leadership away from this member when it also runs
// the election controller, and moves a slow leader here when allowed.
func (l *leadership) place(ctx context.Context) {
	m := l.m
	srv := m.etcd.Server
	l.mu.Lock()
	controller, autoMove, lastPlaced, lastSlowMove, settled := l.controller, l.autoMove, l.lastPlaced, l.lastSlowMove, l.settled
	slowFor, slowLeader := time.Duration(0), uint64(0)
	if l.slow != nil {
		slowFor, slowLeader = time.Since(l.slowSince), l.leader
	}
	l.mu.Unlock()
	self := uint64(srv.MemberID())
	if srv.Leader() == srv.MemberID() && controller != nil && settled >= placementSettled && time.Since(lastPlaced) > placementCooldown {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		id, err := controller(cctx)
		cancel()
		if err == nil && strings.HasPrefix(id, m.cfg.Name+"/") {
			if to := l.transferee(self); to != nil {
				l.mu.Lock()
				l.lastPlaced = time.Now()
				l.mu.Unlock()
				if err := srv.MoveLeader(ctx, self, uint64(to.ID)); err != nil {
					m.log.Warn("Could not move the etcd leadership away from the election controller's member", "to", to.Name, "err", err)
				} else {
					m.log.Info("Moved the etcd leadership away from the member running the election controller, so that one crash does not take both",
						"from", m.cfg.Name, "to", to.Name)
				}
			}
		}
	}
	lead := uint64(srv.Leader())
	if autoMove && lead != 0 && lead != self && lead == slowLeader && slowFor >= l.moveSlowAfterFor(self, lead) && time.Since(lastSlowMove) > moveCooldown {
		l.mu.Lock()
		l.lastSlowMove = time.Now()
		l.moves++
		l.mu.Unlock()
		began := time.Now()
		from := memberNameOf(srv.Cluster().Members(), lead)
		if err := m.electOffSlow(ctx, lead); err != nil {
			m.log.Warn("Could not move the leadership off the slow etcd leader", "leader", from, "err", err)
		} else {
			m.log.Warn("Moved the slow etcd leader's leadership off it", "from", from, "to", memberNameOf(srv.Cluster().Members(), uint64(srv.Leader())),
				"slow_for", slowFor.Round(100*time.Millisecond), "took", time.Since(began).Round(time.Millisecond))
		}
	}
}

// moveSlowAfterFor is how long the leader must have been slow before
// this member (self) moves it off by itself: at once for the healthy
// follower of the lowest ID, moveSlowOthersAfter for the others. Two
// followers standing for election at once split the vote (each votes
// for itself), and the next round comes only after a randomized election
// timeout; every follower sees the same healthy followers (its probes),
// so one moves and the others only when it could not.
func (l *leadership) moveSlowAfterFor(self, lead uint64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := self
	for _, v := range voting(l.m.etcd.Server.Cluster().Members()) {
		id := uint64(v.ID)
		if _, healthy := l.rtt[id]; id != lead && id != self && healthy && id < first {
			first = id
		}
	}
	if first == self {
		return 0
	}
	return moveSlowOthersAfter
}

// errLeaderReelected: the leader electOffSlow stood against won the
// election (its log was the longest).
var errLeaderReelected = errors.New("the leader was elected again")

// electOffSlow moves the leadership off lead, a leader this member found
// slow, by an election: this member stands for election at once, as
// raft's leadership transfer makes its transferee do (raft's
// MsgTimeoutNow, handed to this member's own raft as if lead had sent
// it), and returns once another member than lead leads, within
// electTimeout.
//
// raft's transfer sends MsgTimeoutNow only once the transferee holds the
// leader's whole log, which off a throttled link took up to 24 s (see
// moveLeaderTo). The election needs no such wait, and is safe: raft's
// votes go only to a candidate whose log is at least as up to date as
// the voter's, so whoever a majority elects holds every committed entry
// (every acknowledged write). What it skips are pre-vote and the leader
// lease (a member that hears its leader ignores other candidates), which
// spare a healthy leader needless elections, and the healthy members
// have just found this leader slow; etcd reads linearizably by ReadIndex
// (raft's ReadOnlySafe), never by the lease, and renews etcd leases on a
// leader only after a quorum read proving it still leads. The other
// healthy follower votes for this member when this member's log is at
// least as long as its own; when it is not, that follower has left the
// old term and stands for election itself at its election timeout
// (0.7-1.4 s). The old leader steps down when the first message of the
// new term crosses its link; the writes it admitted but did not commit
// are dropped, and the members' stores answer those they forwarded 504
// (unknown outcome) once they see the new leader.
func (m *Member) electOffSlow(ctx context.Context, lead uint64) error {
	srv := m.etcd.Server
	term := srv.Term()
	if uint64(srv.Leader()) == lead && srv.Term() == term {
		// A stale term (the leader changed meanwhile) makes raft ignore
		// the message.
		if err := m.leadership.standForElection(ctx, lead, term); err != nil {
			return fmt.Errorf("stand for election off the slow leader %x: %w", lead, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, electTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		now := uint64(srv.Leader())
		if now != 0 && now != lead {
			return nil
		}
		if now == lead && srv.Term() > term {
			return fmt.Errorf("%s won the election this member stood in (term %d): its log was the longest: %w: %w",
				memberNameOf(srv.Cluster().Members(), lead), srv.Term(), errLeaderReelected, clusterapi.ErrTryAgain)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no other member than %s leads %s after this member stood for election (term %d, now %d): %w",
				memberNameOf(srv.Cluster().Members(), lead), electTimeout, term, srv.Term(), clusterapi.ErrTryAgain)
		case <-tick.C:
		}
	}
}

// healthyFollowers is self and the other voters but lead that answered
// the last status probe, self first: the members a move off a slow lead
// asks the transfer for, in turn.
func (l *leadership) healthyFollowers(self, lead uint64) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []uint64{self}
	for _, v := range voting(l.m.etcd.Server.Cluster().Members()) {
		id := uint64(v.ID)
		if _, healthy := l.rtt[id]; healthy && id != lead && id != self {
			out = append(out, id)
		}
	}
	return out
}

// transferee is the voter other than not that answered the last status
// probe fastest, nil when none answered.
func (l *leadership) transferee(not uint64) *membership.Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best *membership.Member
	for _, v := range voting(l.m.etcd.Server.Cluster().Members()) {
		id := uint64(v.ID)
		d, ok := l.rtt[id]
		if id == not || !ok {
			continue
		}
		if best == nil || d < l.rtt[uint64(best.ID)] || d == l.rtt[uint64(best.ID)] && v.Name < best.Name {
			best = v
		}
	}
	return best
}

// answering is the voters other than not that answered the last status
// probe, fastest first.
func (l *leadership) answering(not uint64) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint64
	for _, v := range voting(l.m.etcd.Server.Cluster().Members()) {
		if _, ok := l.rtt[uint64(v.ID)]; ok && uint64(v.ID) != not {
			out = append(out, uint64(v.ID))
		}
	}
	slices.SortStableFunc(out, func(a, b uint64) int { return cmp.Compare(l.rtt[a], l.rtt[b]) })
	return out
}

// Slow is this member's verdict on the leader, nil while it is not slow
// (or this member leads).
func (m *Member) Slow() *SlowLeader {
	l := m.leadership
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slow == nil {
		return nil
	}
	s := *l.slow
	return &s
}

// suspects tells whether this member finds lead slow: its verdict, or a
// probe that found lead slow within standInWindow (the verdict clears
// after slowAfter healthy probes, and a slow leader's followers see a
// fast probe now and then).
func (l *leadership) suspects(lead uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slow != nil && l.leader == lead || l.suspect == lead && time.Since(l.suspectedAt) < standInWindow
}

// QuorumRoundTrip is the last quorum round trip this member measured
// (0 before the first probe).
func (m *Member) QuorumRoundTrip() time.Duration {
	l := m.leadership
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.quorumRTT
}

// MoveLeader hands the raft leadership to the voting member called name
// (or with that hexadecimal ID); "" lets any voter that answered this
// one's last status probe take over (the fastest is asked first, the
// first to catch up with the leader's log takes it). When this member
// finds the leader slow (suspects), a move to itself (or "") is an
// election (electOffSlow). It returns the old and the new leader's names once the
// new one leads.
func (m *Member) MoveLeader(ctx context.Context, name string) (from, to string, err error) {
	srv, l := m.etcd.Server, m.leadership
	lead := uint64(srv.Leader())
	if lead == 0 {
		return "", "", fmt.Errorf("no raft leader now (an election under way, or no quorum): %w", clusterapi.ErrTryAgain)
	}
	voters := voting(srv.Cluster().Members())
	var target *membership.Member
	targets := []uint64{}
	if name == "" {
		target = m.leadership.transferee(lead)
		if target == nil {
			return "", "", fmt.Errorf("no other voting member answers: %w", clusterapi.ErrTryAgain)
		}
		// Any member that answers will do: the fastest is asked first,
		// and whichever catches up with the leader's log first takes
		// over (moveLeaderTo).
		targets = l.answering(lead)
	} else {
		for _, v := range srv.Cluster().Members() {
			if v.Name == name || v.ID.String() == name {
				target = v
			}
		}
		if target == nil {
			return "", "", fmt.Errorf("%q: %w", name, ErrNoSuchMember)
		}
		if target.IsLearner {
			return "", "", fmt.Errorf("%s is a learner, which cannot lead: %w", name, clusterapi.ErrInvalidRequest)
		}
	}
	from = memberNameOf(voters, lead)
	if uint64(target.ID) == lead {
		return from, target.Name, nil
	}
	if self := uint64(srv.MemberID()); l.suspects(lead) && (name == "" || uint64(target.ID) == self) {
		// This member finds the leader slow: an election moves the
		// leadership off it without waiting for its log to cross the
		// slow link (electOffSlow).
		err := m.electOffSlow(ctx, lead)
		if err == nil {
			to = memberNameOf(voters, uint64(srv.Leader()))
			m.log.Info("Moved the etcd leadership off the slow leader by an election", "from", from, "to", to)
			return from, to, nil
		}
		if !errors.Is(err, errLeaderReelected) {
			return from, target.Name, err
		}
		// The leader won that election, so a majority hears it: a
		// suspicion from one slow probe (a busy moment) was wrong, and
		// its link carries a transfer. The operator's move is done so.
		m.log.Info("The leader this member found slow won the election it stood in; moving the leadership by a transfer", "leader", from, "err", err)
	}
	if len(targets) == 0 {
		targets = []uint64{uint64(target.ID)}
	}
	if _, err := m.moveLeaderTo(ctx, targets, false); err != nil {
		return from, target.Name, err
	}
	to = memberNameOf(voters, uint64(srv.Leader()))
	m.log.Info("Moved the etcd leadership", "from", from, "to", to)
	return from, to, nil
}

// moveLeaderTo asks the leader to transfer its leadership to one of
// targets (in process when this member leads, else over the leader's
// client port) and waits until this member sees one of them lead, within
// moveTimeout. With offSlow set it is done as soon as any other member
// than the leader it began with leads (a follower's automatic move off a
// slow leader: the leadership left it, whoever took it).
//
// raft hands the leadership over only once the transferee holds the
// leader's whole log, and gives the transfer one election timeout; while a
// transfer is under way the leader drops every proposal. Off a throttled
// link the transferee's appends queue behind everything else the leader
// sends: measured on a 96 kbit link, 15-45 KB of appends stood in the
// leader's socket send queue of each follower when the move began,
// draining at 1-4 KB/s (retransmissions take the rest of the link), and
// a follower's commit index stood still for up to 16 s. One transfer
// asked for at a time never completed there: each ended with entries
// still on their way, and the pause before the next let new writes in,
// which refilled the queue. The transfer is therefore asked for again
// every transferReask: the leader admits hardly a write from then on (raft
// ignores a request for the transfer under way, and one for another
// member starts that one at once), its queues drain, and the transfer in
// place when a transferee has caught up completes (its MsgTimeoutNow is
// sent at the transferee's next acknowledgement, or at once when a
// request finds it caught up). With several targets the requests go to
// each in turn, so that the first to catch up takes over: a follower's
// stream from a throttled leader may break, and raft then sends it the
// whole tail again at every heartbeat, which a move to it alone waited
// out in vain. The writes held meanwhile wait (the member's store sends a
// dropped proposal again until its request timeout) and go to the new
// leader.
func (m *Member) moveLeaderTo(ctx context.Context, targets []uint64, offSlow bool) (from string, err error) {
	srv := m.etcd.Server
	members := srv.Cluster().Members()
	start := uint64(srv.Leader())
	from = memberNameOf(members, start)
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	done := func() bool {
		lead := uint64(srv.Leader())
		return slices.Contains(targets, lead) || offSlow && lead != 0 && lead != start
	}
	reask := transferReask
	if len(targets) > 1 {
		// Each request names another member than the last, which
		// starts a transfer afresh (raft's timeout with it): no gap.
		reask = transferReaskAlternating
	}
	tick := time.NewTicker(reask)
	defer tick.Stop()
	var asks sync.WaitGroup
	defer asks.Wait()
	var mu sync.Mutex
	var lastErr error
	attempts := 0
	for !done() {
		if lead := uint64(srv.Leader()); lead != 0 {
			id := targets[attempts%len(targets)]
			attempts++
			asks.Go(func() {
				if err := m.askTransfer(ctx, members, lead, id); err != nil {
					mu.Lock()
					lastErr = err
					mu.Unlock()
				}
			})
		}
		select {
		case <-ctx.Done():
			if done() {
				return from, nil
			}
			mu.Lock()
			err = lastErr
			mu.Unlock()
			if err == nil {
				err = ctx.Err()
			}
			names := make([]string, len(targets))
			for i, id := range targets {
				names[i] = memberNameOf(members, id)
			}
			return from, fmt.Errorf("move the leadership from %s to %s (asked %d times within %s): %w", from, strings.Join(names, " or "), attempts, moveTimeout, err)
		case <-tick.C:
		}
	}
	return from, nil
}

// transferReask is how often a move to one member asks the leader again
// for its transfer: raft ignores a request for the transfer under way and
// ends that one after its timeout (one election timeout, 700 ms), so the
// leader admits writes only in the moment before the next request. One
// request is a few hundred bytes. Requests that alternate between
// members each start a new transfer (and its timeout), so they need come
// only well within the timeout: transferReaskAlternating.
const (
	transferReask            = 100 * time.Millisecond
	transferReaskAlternating = 300 * time.Millisecond
)

// askTransfer asks leader lead once to transfer its leadership to id. The
// request ends once the leader has taken it (raft ignores it while the
// same transfer is under way); moveLeaderTo watches for the outcome.
func (m *Member) askTransfer(ctx context.Context, members []*membership.Member, lead, id uint64) error {
	srv := m.etcd.Server
	actx, cancel := context.WithTimeout(ctx, raftElection)
	defer cancel()
	var err error
	if lead == uint64(srv.MemberID()) {
		err = srv.MoveLeader(actx, lead, id)
	} else {
		var leader *membership.Member
		for _, v := range members {
			if uint64(v.ID) == lead {
				leader = v
			}
		}
		if leader == nil || len(leader.ClientURLs) == 0 {
			return fmt.Errorf("the leader %x has no client URL: %w", lead, clusterapi.ErrTryAgain)
		}
		c, perr := m.leadership.peer(leader.ClientURLs[0])
		if perr != nil {
			return perr
		}
		_, err = c.MoveLeader(actx, id)
	}
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		// The leader took the request and waited for the transfer
		// past this request's end: the next one follows it.
		return nil
	}
	return err
}

// probeKey is never written: reading it linearizably costs a ReadIndex
// round and an empty range.
const probeKey = trustPrefix + "leadership-probe"

// voting is the voting members of list, by name.
func voting(list []*membership.Member) []*membership.Member {
	var out []*membership.Member
	for _, v := range list {
		if !v.IsLearner {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *membership.Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// memberNameOf is the name of member id in list ("" when absent).
func memberNameOf(list []*membership.Member, id uint64) string {
	for _, v := range list {
		if uint64(v.ID) == id {
			return v.Name
		}
	}
	return ""
}
