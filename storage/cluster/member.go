package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/storage/etcd"
)

// Config starts one member.
type Config struct {
	State
	Paths Paths
	// InitialCluster is etcd's --initial-cluster (name=peerURL,...): this
	// member alone for a new cluster, every member for a joiner. A member
	// restarting from its data ignores it.
	InitialCluster string
	// Join starts a member that was added to an existing cluster.
	Join bool
	// ForceNewCluster starts the member's data as a one-member cluster
	// (etcd's --force-new-cluster: every entry of its log committed, the
	// other members dropped). Only Reset uses it, on a copy.
	ForceNewCluster bool
	// StartTimeout bounds the wait for the member to be ready (it needs a
	// quorum) and, for a joiner, to be promoted from learner.
	StartTimeout time.Duration
	// StaleLearnerAfter bounds how long a learner may stay unreachable
	// before the etcd leader's member removes it (default
	// DefaultStaleLearnerAfter).
	StaleLearnerAfter time.Duration
	// Logger receives the member's own messages and its etcd clients'
	// (labelled "etcd client: ..."); EtcdLogger the etcd server's lines
	// (default Logger), so that the caller labels them (component=etcd).
	Logger     *slog.Logger
	EtcdLogger *slog.Logger
	// Prefix is the replicas' key range on the client port (the members'
	// --etcd-prefix; default /leasehold): the gate lets a replica's
	// certificate touch nothing else.
	Prefix string
	// QuotaBytes is --storage-quota-bytes: the member's etcd quota is
	// sized from it (quotaBackendBytes); 0 keeps etcd's.
	QuotaBytes int64
	// Token is the cluster token a new cluster (Join false) records for
	// joiners; a member's token file follows the record afterwards.
	Token []byte
	// CertValidity is how long the member's renewed certificate lasts
	// (0: pki.DefaultCertValidity).
	CertValidity time.Duration
	// scratch marks a temporary member (an import's), which records no
	// credentials: it is no cluster anyone joins.
	scratch bool
}

// memberCertHost is a host every member certificate covers and no
// replica certificate does (newMemberState, admitReplica): the peer gate
// takes it as the mark of a member's certificate until it has read the
// record.
const memberCertHost = "127.0.0.1"

// Member is a running embedded etcd member.
type Member struct {
	cfg    Config
	etcd   *embed.Etcd
	client *clientv3.Client
	log    *slog.Logger
	done   chan struct{} // closed by Close
	// closing lowers the etcd server's log to debug once Close began:
	// its listeners then fail as they are meant to.
	closing *atomic.Bool
	// learners tracks the unreachable learners (watchLearners), which
	// background ends before Close closes the client.
	learners   *learnerWatch
	background sync.WaitGroup
	// peerHTTP asks other members' peer listeners whether they run, with
	// this member's certificate.
	peerHTTP *http.Client
	// gate guards the client port (trust.go); local is an in-process
	// client of the member, which follows the credentials record for it
	// until stopFollow.
	gate       *gate
	peers      *peerGate
	local      *clientv3.Client
	stopFollow context.CancelFunc
	// leadership probes the raft leader and places it (leadership.go).
	leadership *leadership
	// reaped counts the election leases this member revoked at expiry
	// (reap.go).
	reaped atomic.Int64
	// renewNow wakes the certificate renewal (renew.go) when a rotation
	// asks every certificate to renew.
	renewNow chan struct{}
	// caMu serializes syncCA: the renewal loop, a renewal or an admission
	// asked over the API may each bring the CA files up to the record.
	caMu sync.Mutex
}

// initialClusterToken prefixes the token etcd derives the cluster's and
// the first member's IDs from. Every leasehold cluster bootstraps with one
// member, which adds a random part (see bootstrapToken): two clusters
// started on the same peer URL get different IDs, as they would from a
// new CA.
const initialClusterToken = "leasehold"

// bootstrapToken is initialClusterToken with a random suffix. Only a
// bootstrapping member uses it (joiners get their IDs from MemberAdd), and
// only for its first start: etcd ignores it once its data exists.
func bootstrapToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return initialClusterToken + "-" + hex.EncodeToString(b)
}

// setDefaults fills in what cfg leaves zero.
func (cfg *Config) setDefaults() {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.EtcdLogger == nil {
		cfg.EtcdLogger = cfg.Logger
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.StaleLearnerAfter <= 0 {
		cfg.StaleLearnerAfter = DefaultStaleLearnerAfter
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/leasehold"
	}
}

// Start runs the member and returns once it serves linearizable requests:
// it is ready (it has a quorum) and, when it joined as a learner, promoted.
func Start(ctx context.Context, cfg Config) (*Member, error) {
	cfg.setDefaults()
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	if !cfg.scratch {
		if err := healOwnCert(cfg.Paths, cfg.CertValidity, cfg.Logger); err != nil {
			return nil, err
		}
	}
	self, err := fileFingerprint(cfg.Paths.CertFile)
	if err != nil {
		return nil, err
	}
	g := newGate(cfg.Prefix, self, filepath.Join(cfg.Paths.Dir, "trust.json"), cfg.Logger, func(token []byte) {
		if err := WriteFile(cfg.Paths.TokenFile, append(bytes.Clone(token), '\n'), 0o600); err != nil {
			cfg.Logger.Error("Could not write the rotated cluster token", "file", cfg.Paths.TokenFile, "err", err)
		}
	})
	closing := new(atomic.Bool)
	ec, err := embedConfig(cfg, closing)
	if err != nil {
		return nil, err
	}
	ec.GRPCAdditionalServerOptions = g.serverOptions()
	// The public peer port is taken before etcd starts: a member that
	// cannot have it must fail before its etcd server joins the raft group
	// and publishes itself (a joiner would otherwise look started, then
	// vanish).
	peerLn, err := listenPeer(cfg.ListenPeer) // peerlisten_linux.go
	if err != nil {
		return nil, fmt.Errorf("cluster: peer port: %w", err)
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		peerLn.Close()
		return nil, fmt.Errorf("cluster: start etcd member %s: %w", cfg.Name, err)
	}
	m := &Member{cfg: cfg, etcd: e, log: cfg.Logger, done: make(chan struct{}), closing: closing, gate: g, stopFollow: func() {},
		learners: &learnerWatch{after: cfg.StaleLearnerAfter, since: map[uint64]time.Time{}}}
	m.leadership = &leadership{m: m}
	m.renewNow = make(chan struct{}, 1)
	g.onRotate = func() {
		select {
		case m.renewNow <- struct{}{}:
		default:
		}
	}
	if m.peers, err = startPeerGate(peerLn, e.Peers[0].Addr().String(), cfg.Paths, g, cfg.Logger); err != nil {
		peerLn.Close()
		e.Close()
		return nil, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		m.peers.Close()
		e.Close()
		return nil, fmt.Errorf("cluster: etcd member %s stopped while starting: %w; %s", cfg.Name, err, removedHint(cfg))
	case <-e.Server.StopNotify():
		m.peers.Close()
		e.Close()
		return nil, fmt.Errorf("cluster: etcd member %s stopped while starting; %s", cfg.Name, removedHint(cfg))
	case <-ctx.Done():
		// embed's Close waits for the client listeners, which wait for the
		// server to be ready or stopping: stop it first, or Close of a
		// member that never got a quorum hangs.
		m.peers.Close()
		e.Server.HardStop()
		e.Close()
		if parent.Err() != nil {
			// Not the start timeout: the server is stopping (a signal).
			return nil, fmt.Errorf("cluster: etcd member %s: its start was interrupted before it was ready: %w", cfg.Name, context.Cause(parent))
		}
		return nil, fmt.Errorf("cluster: etcd member %s not ready within %s (no quorum? are the other members up? "+
			"a member removed from the cluster is refused by the others' peer ports and never gets ready): %w", cfg.Name, cfg.StartTimeout, ctx.Err())
	}
	if err := m.followTrust(ctx); err != nil {
		m.Close()
		return nil, err
	}
	tlsCfg, err := etcd.TLSConfig(cfg.Paths.CAFile, cfg.Paths.CertFile, cfg.Paths.KeyFile)
	if err != nil {
		m.Close()
		return nil, err
	}
	m.client, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{cfg.AdvertiseClient},
		TLS:         tlsCfg,
		DialTimeout: 5 * time.Second,
		Logger:      clientLogger(cfg.Logger),
	})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("cluster: client of member %s: %w", cfg.Name, err)
	}
	if err := m.promoteSelf(ctx, tlsCfg); err != nil {
		m.Close()
		return nil, err
	}
	m.peerHTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
	m.background.Go(m.watchLearners)
	m.background.Go(m.recoverSpace)
	if !cfg.scratch {
		m.background.Go(m.renewMember)
		m.background.Go(m.reapElectionLeases)
	}
	return m, nil
}

// followTrust starts the gate: a new cluster records its first member
// and enforces the record from its first request; every member then
// mirrors the record from its own data, before it serves its clients.
func (m *Member) followTrust(ctx context.Context) error {
	m.local = v3client.New(m.etcd.Server)
	local := m.local
	m.gate.mu.Lock()
	m.gate.confirm = func(ctx context.Context, fp string) (Credential, bool) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := local.Get(ctx, credentialsPrefix+fp)
		var cred Credential
		if err != nil || len(resp.Kvs) == 0 || json.Unmarshal(resp.Kvs[0].Value, &cred) != nil {
			return Credential{}, false
		}
		return cred, true
	}
	m.gate.mu.Unlock()
	if !m.cfg.Join && !m.cfg.scratch {
		if err := bootstrapTrust(ctx, m.local, m.cfg.Paths.CertFile, m.cfg.Name, m.cfg.Token); err != nil {
			return err
		}
	}
	fctx, cancel := context.WithCancel(context.Background())
	m.stopFollow = cancel
	loaded := make(chan struct{})
	go m.gate.follow(fctx, m.local, loaded)
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: read the cluster's credentials: %w", ctx.Err())
	}
}

// Token is the cluster token as the record holds it, nil for a cluster
// created before the record kept it.
func (m *Member) Token() []byte { return m.gate.currentToken() }

// removedHint says what to do about the usual reason a member stops at
// start: it was removed, and etcd lets no removed member back in.
func removedHint(cfg Config) string {
	return "if it was removed from the cluster it cannot come back: delete " + cfg.Paths.Dir + " and --join again as a new member"
}

// clientLogger is the zap logger of the member's own etcd clients.
func clientLogger(log *slog.Logger) *zap.Logger {
	return etcd.NewZapLogger(log, etcd.ZapLog{Label: "etcd client"})
}

func embedConfig(cfg Config, closing *atomic.Bool) (*embed.Config, error) {
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Paths.EtcdDir
	var err error
	if ec.ListenClientUrls, err = urls("https://" + cfg.ListenClient); err != nil {
		return nil, err
	}
	if ec.AdvertisePeerUrls, err = urls(cfg.AdvertisePeer); err != nil {
		return nil, err
	}
	if ec.AdvertiseClientUrls, err = urls(cfg.AdvertiseClient); err != nil {
		return nil, err
	}
	// Mutual TLS from the cluster CA on both listeners: a peer or client
	// without a certificate of this cluster is refused.
	tlsInfo := transport.TLSInfo{CertFile: cfg.Paths.CertFile, KeyFile: cfg.Paths.KeyFile,
		TrustedCAFile: cfg.Paths.CAFile, ClientCertAuth: true}
	ec.ClientTLSInfo = tlsInfo
	// etcd listens for peers on loopback, without TLS: the peer port the
	// others dial is the peer gate's (peergate.go), which admits member
	// certificates of the record only. etcd keeps the certificate to dial
	// the other members' gates.
	if ec.ListenPeerUrls, err = urls("http://127.0.0.1:0"); err != nil {
		return nil, err
	}
	peerTLS := tlsInfo
	peerTLS.ClientCertAuth = false
	ec.PeerTLSInfo = peerTLS
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = cfg.Name + "=" + cfg.AdvertisePeer
	}
	ec.InitialClusterToken = bootstrapToken()
	ec.ClusterState = embed.ClusterStateFlagNew
	ec.ForceNewCluster = cfg.ForceNewCluster
	if cfg.Join {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	ec.Logger = "zap"
	etcdLog := slog.New(etcdFirstCommitLog{cfg.EtcdLogger.Handler()}) // etcdlog.go
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcd.NewZapLogger(etcdLog, etcd.ZapLog{Quiet: closing, Exit: os.Exit}))
	// NewConfig leaves this to its flag's default; zero would log every
	// request as slow.
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	// etcd's 100 ms default suits servers with dedicated SSDs: on an SD
	// card or a busy 2-core board every request under load passes it, and
	// the log gets a warning per request. A second is a real stall.
	ec.WarningApplyDuration = time.Second
	// Flash wear (README, "Flash wear"): etcd answers a write once its
	// raft entry is synced in the WAL, and commits its bbolt backend on a
	// timer; a crash replays the WAL past the backend's last commit. Each
	// backend commit rewrites at least the pages on the path to the newest
	// revision and the meta page, so at 50 renewals/s etcd's 100 ms commits
	// a handful of renewals each; one a second carries ten times as many
	// per page written. Costs: up to a second more WAL to replay at start
	// after a crash, and a second of writes held in the backend's buffer.
	ec.BackendBatchInterval = time.Second
	// But under load, a commit every memberBackendBatchLimit writes: until
	// it commits, etcd keeps the writes in a buffer that every read copies
	// (each Range after a write, for its consistent view), so a second of
	// writes at a thousand renewals/s made each read copy a thousand
	// entries. At the wear figure's 50 renewals/s the second still comes
	// first.
	ec.BackendBatchLimit = memberBackendBatchLimit
	// storage/etcd compacts to --watch-history itself.
	ec.AutoCompactionRetention = "0"
	raftTiming(ec) // leadership.go
	sizeForDevice(ec, cfg.QuotaBytes)
	// No metrics or gateway listeners beyond the client URL.
	ec.EnableGRPCGateway = false
	return ec, nil
}

func urls(raw string) ([]url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("cluster: invalid URL %q", raw)
	}
	return []url.URL{*u}, nil
}

// promoteSelf turns a learner into a voting member once it has caught up
// with the leader (etcd refuses the promotion before), retrying until ctx
// ends. A learner serves no MemberPromote itself: it asks the voting
// members, found in its own (serializable) member list. A member that is
// no learner returns at once.
func (m *Member) promoteSelf(ctx context.Context, tlsCfg *tls.Config) error {
	if !m.etcd.Server.IsLearner() {
		return nil
	}
	id := uint64(m.etcd.Server.MemberID())
	var voters *clientv3.Client
	defer func() {
		if voters != nil {
			_ = voters.Close()
		}
	}()
	var err error
	for attempt := 0; ; attempt++ {
		if !m.etcd.Server.IsLearner() {
			return nil
		}
		if voters == nil {
			voters, err = m.votersClient(tlsCfg)
		}
		if voters != nil {
			if _, err = voters.MemberPromote(ctx, id); err == nil {
				m.log.Info("Promoted from learner to voting member", "member", m.cfg.Name)
				return nil
			}
		}
		if attempt%10 == 0 {
			m.log.Info("Waiting to catch up before promotion", "member", m.cfg.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: promote learner %s: %w (last: %v)", m.cfg.Name, ctx.Err(), err)
		case <-m.etcd.Server.StopNotify():
			return fmt.Errorf("cluster: member %s stopped while a learner", m.cfg.Name)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// votersClient is a client of the cluster's voting members, found in the
// membership the member applied (a learner serves no MemberList).
func (m *Member) votersClient(tlsCfg *tls.Config) (*clientv3.Client, error) {
	var eps []string
	for _, mem := range m.etcd.Server.Cluster().Members() {
		if !mem.IsLearner {
			eps = append(eps, mem.ClientURLs...)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("no voting member with a client URL")
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsCfg, DialTimeout: 5 * time.Second,
		Logger: clientLogger(m.log)})
}

// ClientURL is the member's client URL, for the store and for replicas.
func (m *Member) ClientURL() string { return m.cfg.AdvertiseClient }

// Paths are the member's files.
func (m *Member) Paths() Paths { return m.cfg.Paths }

// Name is the member's name.
func (m *Member) Name() string { return m.cfg.Name }

// HasLeader reports whether this member knows a raft leader now: without
// one (no quorum) no write, so no lease renewal, can commit.
func (m *Member) HasLeader() bool { return m.etcd.Server.Leader() != 0 }

// Stopped is closed when the etcd member stops, for instance because it
// was removed from the cluster: its server must not go on serving.
func (m *Member) Stopped() <-chan struct{} { return m.etcd.Server.StopNotify() }

// Close stops the member: first its client, then the server.
func (m *Member) Close() {
	select {
	case <-m.done:
		return
	default:
	}
	close(m.done)
	m.closing.Store(true)
	m.stopFollow()
	// The peer gate first: etcd's shutdown then finds no peer connection
	// held open by it.
	if m.peers != nil {
		m.peers.Close()
	}
	m.background.Wait()
	if m.client != nil {
		_ = m.client.Close()
	}
	if m.local != nil {
		_ = m.local.Close()
	}
	m.etcd.Close()
}

// MemberStatus is one member as "leasehold cluster members" shows it.
type MemberStatus = clusterapi.Member

// Status is the cluster as this member sees it (the election controller
// is Membership's to fill in).
type Status = clusterapi.Status

// Status lists the members as this member applied the membership (a
// serializable view, so that a member cut off from its quorum still shows
// who is up) and asks each for its status, each within a second: a dead
// member shows unhealthy rather than stalling the answer.
func (m *Member) Status(ctx context.Context) (Status, error) {
	st := Status{Self: m.cfg.Name}
	list := m.etcd.Server.Cluster().Members()
	type answer struct {
		i    int
		resp *clientv3.StatusResponse
		err  error
	}
	answers := make(chan answer, len(list))
	for i, mem := range list {
		ms := MemberStatus{Name: mem.Name, ID: mem.ID.String(), PeerURLs: mem.PeerURLs, ClientURLs: mem.ClientURLs, Learner: mem.IsLearner}
		if mem.IsLearner {
			ms.Stale = m.staleInfo(mem)
		}
		st.Members = append(st.Members, ms)
		go func() {
			if len(mem.ClientURLs) == 0 {
				answers <- answer{i: i, err: errors.New("not started yet")}
				return
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			resp, err := m.client.Status(sctx, mem.ClientURLs[0])
			answers <- answer{i: i, resp: resp, err: err}
		}()
	}
	var leaderID, leaderTerm uint64
	for range list {
		a := <-answers
		ms := &st.Members[a.i]
		if a.err != nil {
			ms.Error = a.err.Error()
			continue
		}
		ms.RaftIndex, ms.RaftTerm, ms.DBSize = a.resp.RaftIndex, a.resp.RaftTerm, a.resp.DbSize
		ms.Healthy = a.resp.Leader != 0 && len(a.resp.Errors) == 0
		switch {
		case len(a.resp.Errors) > 0:
			ms.Error = strings.Join(a.resp.Errors, "; ")
		case a.resp.Leader == 0:
			ms.Error = "no leader (no quorum)"
		}
		// Members may briefly disagree during an election: the leader of
		// the latest term wins.
		if a.resp.Leader != 0 && a.resp.RaftTerm >= leaderTerm {
			leaderID, leaderTerm = a.resp.Leader, a.resp.RaftTerm
		}
	}
	for i := range st.Members {
		if uint64(list[i].ID) == leaderID && leaderID != 0 {
			st.Members[i].Leader = true
			st.Leader = st.Members[i].Name
		}
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].Name < st.Members[j].Name })
	return st, nil
}

// ClientURLs are the client URLs of the voting members as this member
// applied the membership, for replicas (--storage etcd) to use.
func (m *Member) ClientURLs() []string {
	var out []string
	for _, mem := range m.etcd.Server.Cluster().Members() {
		if !mem.IsLearner {
			out = append(out, mem.ClientURLs...)
		}
	}
	sort.Strings(out)
	return out
}

// Admitted is what a joiner needs to start: etcd's initial cluster with
// itself in it, and the members' client URLs.
type Admitted struct {
	InitialCluster string
	ClientURLs     []string
}

// AddLearner adds a joiner as a learner (etcd's safe way: it does not
// count towards quorum until it caught up and was promoted). A member of
// that name that was added but never started (a join that failed midway)
// is replaced; a started member of that name is refused.
func (m *Member) AddLearner(ctx context.Context, name, peerURL string) (Admitted, error) {
	list, err := m.client.MemberList(ctx)
	if err != nil {
		return Admitted{}, fmt.Errorf("cluster: member list: %w", err)
	}
	for _, mem := range list.Members {
		if mem.Name == name && mem.IsLearner {
			// A learner of that name that never got promoted (its
			// device died halfway, and rejoins afresh): it goes once
			// stale, and the joiner retries until then.
			return Admitted{}, m.learnersInTheWay(name, fmt.Errorf("a learner named %q exists", name))
		}
		if mem.Name == name {
			return Admitted{}, fmt.Errorf("cluster: a member named %q exists: %w", name, ErrMemberExists)
		}
		for _, u := range mem.PeerURLs {
			if u == peerURL && mem.Name == "" {
				// Added by an earlier attempt that never started.
				if _, err := m.client.MemberRemove(ctx, mem.ID); err != nil {
					return Admitted{}, fmt.Errorf("cluster: remove the unstarted member at %s: %w", peerURL, err)
				}
			} else if u == peerURL {
				return Admitted{}, fmt.Errorf("cluster: member %q already uses peer URL %s: %w", mem.Name, peerURL, ErrMemberExists)
			}
		}
	}
	resp, err := m.client.MemberAddAsLearner(ctx, []string{peerURL})
	if isTooManyLearners(err) {
		return Admitted{}, m.learnersInTheWay(name, err)
	}
	if err != nil {
		return Admitted{}, fmt.Errorf("cluster: add learner %s at %s: %w", name, peerURL, err)
	}
	var ad Admitted
	var parts []string
	for _, mem := range resp.Members {
		n := mem.Name
		if mem.ID == resp.Member.ID {
			n = name
		}
		if n == "" {
			continue // another joiner that has not started
		}
		for _, u := range mem.PeerURLs {
			parts = append(parts, n+"="+u)
		}
		ad.ClientURLs = append(ad.ClientURLs, mem.ClientURLs...)
	}
	ad.InitialCluster = strings.Join(parts, ",")
	m.log.Info("Added a learner", "member", name, "peer_url", peerURL)
	return ad, nil
}

// The errors of the membership operations are the wire contract's, which
// picks the HTTP status of each.
var (
	// ErrMemberExists is returned by AddLearner for a name or peer URL in use.
	ErrMemberExists = clusterapi.ErrMemberExists
	// ErrNoSuchMember is returned by Remove for an unknown name.
	ErrNoSuchMember = clusterapi.ErrNoSuchMember
	// ErrNoQuorum is returned by Remove when the cluster has no quorum.
	ErrNoQuorum = clusterapi.ErrNoQuorum
)

// removeTimeout bounds a removal: with a quorum it takes milliseconds,
// and without one etcd would wait for a leader that may never come.
const removeTimeout = 5 * time.Second

// Remove removes the member called name (or with that hexadecimal ID).
// etcd refuses the removal when it would leave the cluster without a
// quorum of started members; a removed member stops at its next contact
// and cannot come back with its old data. It fails within removeTimeout:
// with ErrNoQuorum and what to do when too few members answer, with
// ErrTryAgain when a quorum answers but has no leader yet
// (removalBlocked).
func (m *Member) Remove(ctx context.Context, name string) error {
	var target *membership.Member // the local view: no quorum needed
	for _, mem := range m.etcd.Server.Cluster().Members() {
		if mem.Name == name || mem.ID.String() == name {
			target = mem
		}
	}
	if target == nil {
		return fmt.Errorf("cluster: %q: %w", name, ErrNoSuchMember)
	}
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	if m.etcd.Server.Leader() == 0 {
		return m.removalBlocked(ctx, name, target, nil)
	}
	if err := m.leaderSilent(ctx, name, target); err != nil {
		return err
	}
	// Its certificates first: once the member is out of the membership
	// nothing would stop its copy from knocking on the client ports. The
	// same write rotates the cluster token, which the device holds too.
	// Without a leader the requests fail at once instead of waiting.
	var revoked []string
	err := error(nil)
	if target.Name != "" {
		revoked, err = revokeCredentials(clientv3.WithRequireLeader(ctx), m.client, KindMember, target.Name)
	}
	if err == nil {
		_, err = m.client.MemberRemove(clientv3.WithRequireLeader(ctx), uint64(target.ID))
	}
	if err != nil {
		if waitable(err) || m.etcd.Server.Leader() == 0 {
			return m.removalBlocked(ctx, name, target, err)
		}
		return fmt.Errorf("cluster: remove member %s: %w", name, err)
	}
	m.awaitRevoked(ctx, name, revoked)
	m.log.Info("Removed a member; its certificates are revoked and the cluster token rotated", "member", name, "certificates", len(revoked))
	m.warnLegacy(name)
	return nil
}

// Revoke revokes every certificate of the replica called name and rotates
// the cluster token: once it returns, the replica's next request to this
// member is refused (the other members follow the record within their
// watch's delay, milliseconds), and its open watches end. It needs a quorum, as Remove does, and is refused or
// told to wait in the same words.
func (m *Member) Revoke(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	if m.etcd.Server.Leader() == 0 {
		return m.removalBlocked(ctx, name, nil, nil)
	}
	revoked, err := revokeCredentials(clientv3.WithRequireLeader(ctx), m.client, KindReplica, name)
	if err != nil {
		if waitable(err) || m.etcd.Server.Leader() == 0 {
			return m.removalBlocked(ctx, name, nil, err)
		}
		return fmt.Errorf("cluster: revoke replica %s: %w", name, err)
	}
	if len(revoked) == 0 {
		return fmt.Errorf("cluster: %q: %w", name, ErrNoSuchMember)
	}
	m.awaitRevoked(ctx, name, revoked)
	m.log.Info("Revoked a replica; the cluster token rotated", "replica", name, "certificates", len(revoked))
	m.warnLegacy(name)
	return nil
}

// awaitRevoked waits (within ctx) until this member refuses the revoked
// certificates, so that a removal or revocation answered here holds here
// from then on; the other members follow the record within their watch's
// delay. A gate that has not applied it by then is logged, not an error:
// the revocation itself is recorded.
func (m *Member) awaitRevoked(ctx context.Context, name string, fingerprints []string) {
	if len(fingerprints) == 0 || m.gate.awaitRevoked(ctx, fingerprints) {
		return
	}
	m.log.Warn("The revocation is recorded but this member's gate has not applied it yet; it follows the record", "device", name)
}

// warnLegacy says, on a cluster created before the credentials record,
// that a removed device's certificate is still accepted.
func (m *Member) warnLegacy(name string) {
	m.gate.mu.RLock()
	enforce := m.gate.enforce
	m.gate.mu.RUnlock()
	if !enforce {
		m.log.Warn("This cluster was created before leasehold recorded the certificates it admits: its members still accept "+
			"any certificate of the cluster CA, the removed device's included. Restore a backup into a new cluster to enforce the record "+
			"(docs/cluster.md, \"A stolen device\")", "removed", name)
	}
}

// isMember reports whether name (or a hexadecimal ID) is a member, as this
// member applied the membership.
func (m *Member) isMember(name string) bool {
	for _, mem := range m.etcd.Server.Cluster().Members() {
		if mem.Name == name || mem.ID.String() == name {
			return true
		}
	}
	return false
}
