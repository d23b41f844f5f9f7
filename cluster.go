package main

// "leasehold serve --cluster-init" and "--join": the embedded etcd
// member's files (the cluster CA, its certificate, its state), the joiner's
// half of the handshake, and the member's half that admits joiners. The
// member itself runs in storage/cluster; its HTTP endpoints live in web.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/storage/backend"
	"github.com/leasehold/leasehold/storage/cluster"
	"github.com/leasehold/leasehold/web"
	clusterclient "github.com/leasehold/leasehold/web/client/cluster"
	"github.com/leasehold/leasehold/web/pki"
)

// clusterSetup is a prepared member: its files and the cluster token.
type clusterSetup struct {
	paths cluster.Paths
	token []byte
	// prefix is the members' --etcd-prefix, which replicas must share.
	prefix string
}

// prepareCluster readies the embedded member of --cluster-init or --join
// and stores its configuration in cfg.Storage.Cluster.Member; nil without
// either flag. A data directory that already holds a member restarts it,
// whatever the flags say: its data alone says which cluster it belongs to.
func prepareCluster(ctx context.Context, cfg *serveConfig, log *slog.Logger) (*clusterSetup, error) {
	cl := &cfg.Storage.Cluster
	if !cl.Enabled() {
		return nil, nil
	}
	paths := cluster.PathsIn(cfg.DataDir + string(os.PathSeparator) + "cluster")
	token, err := clusterToken(cl, paths)
	if err != nil {
		return nil, err
	}
	cs := &clusterSetup{paths: paths, token: token, prefix: cfg.Storage.EtcdPrefix}
	st, err := cluster.LoadState(paths)
	switch {
	case err == nil:
		if len(token) == 0 {
			return nil, fmt.Errorf("the cluster token of %s is missing: pass --cluster-token or --cluster-token-file", paths.Dir)
		}
		log.Info("Restarting the cluster member from its data", "member", st.Name, "dir", paths.Dir)
		cl.Member = &cluster.Config{State: st, Paths: paths, Join: true}
		return cs, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if !cl.Init && cl.Join == "" {
		return nil, fmt.Errorf("%s holds a cluster member that never started: start it with --cluster-init or --join again", paths.Dir)
	}
	if len(token) == 0 {
		return nil, errors.New("--cluster-init and --join need --cluster-token or --cluster-token-file")
	}
	st, hosts, err := newMemberState(cl)
	if err != nil {
		return nil, err
	}
	if cl.Init {
		if err := planImport(cfg.DataDir, paths, &st, log); err != nil {
			return nil, err
		}
		ca, err := pki.NewAuthority("leasehold-cluster-ca@" + time.Now().UTC().Format("20060102T150405Z"))
		if err != nil {
			return nil, err
		}
		certPEM, keyPEM, err := ca.IssuePeer(st.Name, hosts)
		if err != nil {
			return nil, err
		}
		if err := cs.writeFiles(ca.CertPEM, ca.KeyPEM, certPEM, keyPEM, st); err != nil {
			return nil, err
		}
		log.Info("Starting a new cluster", "member", st.Name, "peer_url", st.AdvertisePeer, "client_url", st.AdvertiseClient)
		cl.Member = &cluster.Config{State: st, Paths: paths}
		return cs, nil
	}
	if _, err := os.Stat(paths.RestoreSnapshot); err == nil {
		return nil, fmt.Errorf("%s holds a snapshot staged by leasehold restore: start the restored cluster with --cluster-init, or remove it to join another", paths.RestoreSnapshot)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, singleDeviceDB)); err == nil {
		log.Warn("The single-device database is not imported by --join (the cluster's data wins); it stays as it is", "file", filepath.Join(cfg.DataDir, singleDeviceDB))
	}
	resp, err := joinWithRetry(ctx, cl.Join, token, clusterclient.JoinRequest{
		Name: st.Name, PeerURL: st.AdvertisePeer, ClientURL: st.AdvertiseClient, Hosts: hosts}, log)
	if err != nil {
		return nil, err
	}
	if err := cs.writeFiles([]byte(resp.CACert), []byte(resp.CAKey), []byte(resp.Cert), []byte(resp.Key), st); err != nil {
		return nil, err
	}
	log.Info("Joined the cluster as a learner", "member", st.Name, "via", cl.Join, "initial_cluster", resp.InitialCluster)
	cl.Member = &cluster.Config{State: st, Paths: paths, InitialCluster: resp.InitialCluster, Join: true}
	return cs, nil
}

// singleDeviceDB is the bbolt database of a single-device server, which
// --cluster-init imports.
const singleDeviceDB = "leasehold.db"

// planImport marks a new cluster's state with the import of the data
// directory's single-device database, unless a restored snapshot is its
// data. The import itself runs before the member starts
// (storage/backend), and the file is kept beside, renamed.
func planImport(dataDir string, paths cluster.Paths, st *cluster.State, log *slog.Logger) error {
	if _, err := os.Stat(paths.RestoreSnapshot); err == nil {
		log.Info("Starting the new cluster from the snapshot staged by leasehold restore", "snapshot", paths.RestoreSnapshot)
		return nil
	}
	src := filepath.Join(dataDir, singleDeviceDB)
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	backup := src + ".pre-cluster"
	if _, err := os.Stat(backup); err == nil {
		return fmt.Errorf("%s is in the way of the backup of %s that the import keeps: move it elsewhere", backup, src)
	}
	st.Import = &cluster.ImportRecord{Source: src, Backup: backup}
	log.Info("The new cluster imports the single-device database (one-way); resourceVersions change", "file", src, "kept_as", backup)
	return nil
}

// joinTimeout bounds how long a joiner retries a member that is down or
// not ready to admit it.
const joinTimeout = 2 * time.Minute

// joinWithRetry runs the handshake until it succeeds, fails for good
// (wrong token, name in use), or joinTimeout passes.
func joinWithRetry(ctx context.Context, apiURL string, token []byte, req clusterclient.JoinRequest, log *slog.Logger) (clusterclient.JoinResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		resp, _, err := clusterclient.Join(ctx, apiURL, token, req)
		if err == nil || !clusterclient.Retryable(err) {
			return resp, err
		}
		if attempt%5 == 0 {
			log.Info("Joining the cluster; retrying", "via", apiURL, "err", err)
		}
		select {
		case <-ctx.Done():
			return resp, fmt.Errorf("%w (gave up after %s)", err, joinTimeout)
		case <-time.After(time.Second):
		}
	}
}

// clusterToken is --cluster-token-file, --cluster-token, or the token a
// previous start stored; a given one replaces the stored one.
func clusterToken(cl *backend.Cluster, paths cluster.Paths) ([]byte, error) {
	token, err := givenClusterToken(cl)
	if err != nil {
		return nil, err
	}
	if token != "" {
		if err := cluster.WriteFile(paths.TokenFile, []byte(token+"\n"), 0o600); err != nil {
			return nil, err
		}
		return []byte(token), nil
	}
	data, err := os.ReadFile(paths.TokenFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster token: %w", err)
	}
	return []byte(strings.TrimSpace(string(data))), nil
}

// givenClusterToken is the token of --cluster-token-file or
// --cluster-token ("" when neither is given).
func givenClusterToken(cl *backend.Cluster) (string, error) {
	if cl.TokenFile == "" {
		return cl.Token, nil
	}
	data, err := os.ReadFile(cl.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--cluster-token-file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("--cluster-token-file %s is empty", cl.TokenFile)
	}
	return token, nil
}

// newMemberState names a new member and chooses its URLs; hosts are what
// its certificate covers.
func newMemberState(cl *backend.Cluster) (cluster.State, []string, error) {
	peerHost, peerPort, _ := net.SplitHostPort(cl.PeerListen)
	clientListen := cl.ClientListen
	if clientListen == "" {
		p, err := strconv.Atoi(peerPort)
		if err != nil || p < 2 {
			return cluster.State{}, nil, fmt.Errorf("--peer-listen %q: give a port number (or --cluster-client-listen)", cl.PeerListen)
		}
		clientListen = net.JoinHostPort(peerHost, strconv.Itoa(p-1))
	}
	_, clientPort, _ := net.SplitHostPort(clientListen)
	advertise := cl.AdvertiseHost
	if advertise == "" {
		advertise = peerHost
		if ip := net.ParseIP(peerHost); peerHost == "" || (ip != nil && ip.IsUnspecified()) {
			var err error
			if advertise, err = routeHost(cl.Join); err != nil {
				return cluster.State{}, nil, fmt.Errorf("choose the address to advertise (give --advertise-host): %w", err)
			}
		}
	}
	name := cl.Name
	if name == "" {
		host, _ := os.Hostname()
		name = host + "-" + peerPort
	}
	if !memberName.MatchString(name) {
		return cluster.State{}, nil, fmt.Errorf("invalid member name %q: use letters, digits, '.', '_' and '-' (at most 63)", name)
	}
	st := cluster.State{
		Name:            name,
		ListenPeer:      cl.PeerListen,
		ListenClient:    clientListen,
		AdvertisePeer:   "https://" + net.JoinHostPort(advertise, peerPort),
		AdvertiseClient: "https://" + net.JoinHostPort(advertise, clientPort),
	}
	hosts := []string{advertise, "127.0.0.1", "::1", "localhost"}
	return st, hosts, nil
}

var memberName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// routeHost is the local address the route towards joinURL's host uses
// (a UDP "connection" sends nothing), or without --join the first
// non-loopback address.
func routeHost(joinURL string) (string, error) {
	if joinURL != "" {
		u, err := url.Parse(joinURL)
		if err != nil {
			return "", err
		}
		c, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), "9"))
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback address")
}

func (cs *clusterSetup) writeFiles(caCert, caKey, cert, key []byte, st cluster.State) error {
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{cs.paths.CAFile, caCert, 0o644}, {cs.paths.CAKeyFile, caKey, 0o600},
		{cs.paths.CertFile, cert, 0o644}, {cs.paths.KeyFile, key, 0o600},
	} {
		if err := cluster.WriteFile(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	return cluster.SaveState(cs.paths, st)
}

// clusterView is GET /leasehold/v1/cluster: the members, and which
// server runs the election controller (a member's or replica's name, and
// its election identity "name/pid/nonce"); empty while none does or when
// unknown.
type clusterView struct {
	cluster.Status
	ElectionController   string `json:"electionController"`
	ElectionControllerID string `json:"electionControllerID,omitempty"`
	// ElectionControllerUnknown says why the controller is not named: it
	// is read linearizably, which a member without a quorum cannot do.
	ElectionControllerUnknown string `json:"electionControllerUnknown,omitempty"`
}

// endpoints are the web server's membership endpoints for member m,
// whose store is store.
func (cs *clusterSetup) endpoints(m *cluster.Member, store *backend.MemberStore) *web.Cluster {
	return &web.Cluster{
		Token: cs.token,
		Join: func(ctx context.Context, req web.ClusterJoinRequest) (web.ClusterJoinResponse, error) {
			return cs.admit(ctx, m, req)
		},
		Status: func(ctx context.Context) (any, error) {
			st, err := m.Status(ctx)
			if err != nil {
				return nil, err
			}
			view := clusterView{Status: st}
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if id, err := store.ElectionLeader(lctx, electionControllerName); err != nil {
				view.ElectionControllerUnknown = err.Error()
			} else if id != "" {
				view.ElectionControllerID = id
				view.ElectionController, _, _ = strings.Cut(id, "/")
			}
			return view, nil
		},
		Remove: func(ctx context.Context, name string) error {
			err := m.Remove(ctx, name)
			switch {
			case errors.Is(err, cluster.ErrNoSuchMember):
				return fmt.Errorf("%w: %w", web.ErrNoSuchMember, err)
			case errors.Is(err, cluster.ErrNoQuorum):
				return markedError{err: err, mark: web.ErrNoQuorum}
			}
			return err
		},
	}
}

// admit issues a joiner's certificate from the cluster CA and adds it as
// a learner.
func (cs *clusterSetup) admit(ctx context.Context, m *cluster.Member, req web.ClusterJoinRequest) (web.ClusterJoinResponse, error) {
	var out web.ClusterJoinResponse
	if !memberName.MatchString(req.Name) {
		return out, fmt.Errorf("invalid member name %q", req.Name)
	}
	if req.Replica {
		return cs.admitReplica(m, req.Name)
	}
	for _, raw := range []string{req.PeerURL, req.ClientURL} {
		if u, err := url.Parse(raw); err != nil || u.Scheme != "https" || u.Port() == "" {
			return out, fmt.Errorf("invalid member URL %q: want https://host:port", raw)
		}
	}
	caCert, err := os.ReadFile(cs.paths.CAFile)
	if err != nil {
		return out, fmt.Errorf("cluster CA: %w", err)
	}
	caKey, err := os.ReadFile(cs.paths.CAKeyFile)
	if err != nil {
		return out, fmt.Errorf("cluster CA key: %w", err)
	}
	ca, err := pki.ParseAuthority(caCert, caKey)
	if err != nil {
		return out, err
	}
	cert, key, err := ca.IssuePeer(req.Name, req.Hosts)
	if err != nil {
		return out, err
	}
	ad, err := m.AddLearner(ctx, req.Name, req.PeerURL)
	if errors.Is(err, cluster.ErrMemberExists) {
		return out, fmt.Errorf("%w: %w", web.ErrMemberExists, err)
	}
	if err != nil {
		return out, err
	}
	return web.ClusterJoinResponse{CACert: string(caCert), CAKey: string(caKey), Cert: string(cert), Key: string(key),
		InitialCluster: ad.InitialCluster, ClientURLs: ad.ClientURLs}, nil
}

// admitReplica issues an API-only replica a client certificate for the
// members' client listeners. It gets the CA's certificate to verify the
// members, not its key: a replica admits nobody.
func (cs *clusterSetup) admitReplica(m *cluster.Member, name string) (web.ClusterJoinResponse, error) {
	caCert, err := os.ReadFile(cs.paths.CAFile)
	if err != nil {
		return web.ClusterJoinResponse{}, fmt.Errorf("cluster CA: %w", err)
	}
	caKey, err := os.ReadFile(cs.paths.CAKeyFile)
	if err != nil {
		return web.ClusterJoinResponse{}, fmt.Errorf("cluster CA key: %w", err)
	}
	ca, err := pki.ParseAuthority(caCert, caKey)
	if err != nil {
		return web.ClusterJoinResponse{}, err
	}
	// A year's certificate would cut the replica off the members a year
	// later: nothing renews it (the members' own are as long-lived).
	cert, key, err := ca.IssueLongLivedClient(name, nil)
	if err != nil {
		return web.ClusterJoinResponse{}, err
	}
	return web.ClusterJoinResponse{CACert: string(caCert), Cert: string(cert), Key: string(key),
		ClientURLs: m.ClientURLs(), EtcdPrefix: cs.prefix}, nil
}

// markedError is err, also matching mark (a web sentinel that picks the
// HTTP status) without adding mark's text to the message, which the
// operator reads.
type markedError struct{ err, mark error }

func (e markedError) Error() string   { return e.err.Error() }
func (e markedError) Unwrap() []error { return []error{e.err, e.mark} }
