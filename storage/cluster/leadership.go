package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"

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
// trial saw no write complete for 33 s. Every member probes, once a
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
// Config.MoveSlowLeader a follower that has seen the leader slow for
// moveSlowAfter moves it to itself, at most once per moveCooldown.

const (
	raftHeartbeat = 100 * time.Millisecond
	raftElection  = 700 * time.Millisecond

	// probeEvery is how often a member probes the leadership.
	probeEvery = time.Second
	// leaderProbeTimeout bounds one probe: a probe that times out counts as
	// taking that long. Under probeEvery, so that probes do not pile up.
	leaderProbeTimeout = 900 * time.Millisecond
	// slowQuorumRoundTrip is the quorum round trip above which a follower
	// suspects the leader; a healthy LAN cluster under load takes
	// milliseconds to tens of milliseconds.
	slowQuorumRoundTrip = 500 * time.Millisecond
	// slowRatio is how many times faster than the leader another follower
	// must answer for the leader to be the slow one.
	slowRatio = 4
	// slowAfter probes in a row raise (or clear) the verdict.
	slowAfter = 3
	// moveSlowAfter is how long a leader must have been slow before a
	// follower moves it (Config.MoveSlowLeader).
	moveSlowAfter = 5 * time.Second
	// moveTimeout bounds one move of the leadership (its attempts).
	moveTimeout = 15 * time.Second
	// moveCooldown spaces a member's automatic moves of a slow leader.
	moveCooldown = time.Minute
	// placementCooldown spaces a member's moves away from the election
	// controller.
	placementCooldown = 10 * time.Second
	// placementSettled is how many probes in a row must find every voter
	// healthy before the leadership moves away from the controller: with a
	// member down, the two left are a quorum only together, so the move
	// would gain nothing, and a member that restarts is spared a leader
	// change during its first writes (a server whose engine cannot create
	// its namespaces at start exits) and a healed one its catch-up (with 5
	// probes, a healed member's first write came 10-13 s after the heal,
	// 1.5-4.3 s without the move).
	placementSettled = 10
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
	lastMove  time.Time // this member's last move (either kind)
	moves     int       // moves of a slow leader by this member
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
	if lead != l.leader {
		l.leader, l.sick, l.ok = lead, 0, 0
		l.clearLocked(lead)
	}
	if lead == 0 || lead == self {
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
	controller, autoMove, last, settled := l.controller, l.autoMove, l.lastMove, l.settled
	slowFor := time.Duration(0)
	if l.slow != nil {
		slowFor = time.Since(l.slowSince)
	}
	l.mu.Unlock()
	self := uint64(srv.MemberID())
	if srv.Leader() == srv.MemberID() && controller != nil && settled >= placementSettled && time.Since(last) > placementCooldown {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		id, err := controller(cctx)
		cancel()
		if err == nil && strings.HasPrefix(id, m.cfg.Name+"/") {
			if to := l.transferee(self); to != nil {
				l.mu.Lock()
				l.lastMove = time.Now()
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
	if autoMove && slowFor >= l.moveSlowAfterFor(self, uint64(srv.Leader())) && time.Since(last) > moveCooldown && srv.Leader() != srv.MemberID() {
		l.mu.Lock()
		l.lastMove = time.Now()
		l.moves++
		l.mu.Unlock()
		from, err := m.moveLeaderTo(ctx, self)
		if err != nil {
			m.log.Warn("Could not move the slow etcd leader's leadership here", "leader", from, "err", err)
		} else {
			m.log.Warn("Moved the slow etcd leader's leadership here", "from", from, "to", m.cfg.Name, "slow_for", slowFor.Round(time.Second))
		}
	}
}

// moveSlowAfterFor is how long the leader must have been slow before
// this member (self) moves it here by itself: moveSlowAfter for the
// healthy follower of the lowest ID, three times that for the others.
// raft aborts a transfer under way when asked for one to another member,
// so two followers moving a slow leader to themselves at once aborted
// each other's transfer for the whole moveTimeout (seen in the fault
// suite); every follower sees the same healthy followers (its probes), so
// one moves and the others only when it could not.
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
		return moveSlowAfter
	}
	return 3 * moveSlowAfter
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

// QuorumRoundTrip is the last quorum round trip this member measured
// (0 before the first probe).
func (m *Member) QuorumRoundTrip() time.Duration {
	l := m.leadership
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.quorumRTT
}

// MoveLeader hands the raft leadership to the voting member called name
// (or with that hexadecimal ID); "" picks the member that answered this
// one's last status probe fastest. It returns the old and the new
// leader's names once the new one leads.
func (m *Member) MoveLeader(ctx context.Context, name string) (from, to string, err error) {
	srv := m.etcd.Server
	lead := uint64(srv.Leader())
	if lead == 0 {
		return "", "", fmt.Errorf("no raft leader now (an election under way, or no quorum): %w", clusterapi.ErrTryAgain)
	}
	voters := voting(srv.Cluster().Members())
	var target *membership.Member
	if name == "" {
		target = m.leadership.transferee(lead)
		if target == nil {
			return "", "", fmt.Errorf("no other voting member answers: %w", clusterapi.ErrTryAgain)
		}
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
	if _, err := m.moveLeaderTo(ctx, uint64(target.ID)); err != nil {
		return from, target.Name, err
	}
	m.log.Info("Moved the etcd leadership", "from", from, "to", target.Name)
	return from, target.Name, nil
}

// moveLeaderTo asks the leader to transfer its leadership to id (in
// process when this member leads, else over the leader's client port) and
// waits until this member sees id lead, within moveTimeout. raft hands the
// leadership over only once the transferee holds the leader's whole log,
// and gives up after an election timeout: a slow leader's transferee may
// need longer to catch up, so the transfer is asked for again until it
// happens (the appends go on between the attempts).
func (m *Member) moveLeaderTo(ctx context.Context, id uint64) (from string, err error) {
	srv := m.etcd.Server
	members := srv.Cluster().Members()
	from = memberNameOf(members, uint64(srv.Leader()))
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		lead := uint64(srv.Leader())
		if lead == id {
			return from, nil
		}
		if lead != 0 {
			err = m.askTransfer(ctx, members, lead, id)
		}
		if uint64(srv.Leader()) == id {
			return from, nil
		}
		// A random pause: another member asking a transfer to another
		// target (an operator's move beside a follower's automatic one)
		// aborts this one in raft, and this one aborts its; in step they
		// would abort each other until both gave up.
		pause := raftHeartbeat + rand.N(2*raftElection)
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return from, fmt.Errorf("move the leadership from %s to %s (%d attempts within %s): %w", from, memberNameOf(members, id), attempt+1, moveTimeout, err)
		case <-time.After(pause):
		}
	}
}

// askTransfer asks leader lead once to transfer its leadership to id, and
// waits up to two election timeouts for it.
func (m *Member) askTransfer(ctx context.Context, members []*membership.Member, lead, id uint64) error {
	srv := m.etcd.Server
	actx, cancel := context.WithTimeout(ctx, 2*raftElection)
	defer cancel()
	if lead == uint64(srv.MemberID()) {
		return srv.MoveLeader(actx, lead, id)
	}
	var leader *membership.Member
	for _, v := range members {
		if uint64(v.ID) == lead {
			leader = v
		}
	}
	if leader == nil || len(leader.ClientURLs) == 0 {
		return fmt.Errorf("the leader %x has no client URL: %w", lead, clusterapi.ErrTryAgain)
	}
	c, err := m.leadership.peer(leader.ClientURLs[0])
	if err != nil {
		return err
	}
	if _, err = c.MoveLeader(actx, id); err != nil {
		return err
	}
	for uint64(srv.Leader()) != id {
		select {
		case <-actx.Done():
			return actx.Err()
		case <-time.After(raftHeartbeat / 2):
		}
	}
	return nil
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
