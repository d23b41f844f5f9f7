package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// Provisioned is a member ready to start: its configuration, and what
// admitting others needs once it runs (NewMembership).
type Provisioned struct {
	// Config starts the member (Start).
	Config Config
	paths  Paths
	token  []byte
	// prefix is the members' --etcd-prefix, which replicas must share.
	prefix string
}

// Provision readies the embedded member of --cluster-init or --join in
// dir: a data directory that already holds a member restarts it, whatever
// the flags say (its data alone says which cluster it belongs to); a new
// cluster gets its CA and its first member's certificate; a joiner runs
// the handshake with the member at f.Join, which issues its certificate.
// prefix is the members' etcd key prefix.
func Provision(ctx context.Context, f Flags, dir datadir.Layout, prefix string, log *slog.Logger) (*Provisioned, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	paths := dir.Member()
	token, err := clusterToken(f, paths)
	if err != nil {
		return nil, err
	}
	p := &Provisioned{paths: paths, token: token, prefix: prefix}
	st, err := LoadState(paths)
	switch {
	case err == nil:
		if len(token) == 0 {
			return nil, fmt.Errorf("the cluster token of %s is missing: pass --cluster-token or --cluster-token-file", paths.Dir)
		}
		log.Info("Restarting the cluster member from its data", "member", st.Name, "dir", paths.Dir)
		p.Config = Config{State: st, Paths: paths, Join: true, Prefix: prefix, Token: token}
		return p, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if !f.Init && f.Join == "" {
		return nil, fmt.Errorf("%s holds a cluster member that never started: start it with --cluster-init or --join again", paths.Dir)
	}
	if len(token) == 0 {
		return nil, errors.New("--cluster-init and --join need --cluster-token or --cluster-token-file")
	}
	st, hosts, err := newMemberState(f)
	if err != nil {
		return nil, err
	}
	if f.Init {
		return p, p.bootstrap(dir, st, hosts, log)
	}
	return p, p.join(ctx, f.Join, dir, st, hosts, log)
}

// bootstrap makes the first member of a new cluster: a new CA, its
// certificate, and the import of the single-device database (or the
// snapshot "leasehold restore" staged) as the cluster's first data.
func (p *Provisioned) bootstrap(dir datadir.Layout, st State, hosts []string, log *slog.Logger) error {
	if err := planImport(dir, &st, log); err != nil {
		return err
	}
	ca, err := pki.NewAuthority("leasehold-cluster-ca@" + time.Now().UTC().Format("20060102T150405Z"))
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.IssuePeer(st.Name, hosts)
	if err != nil {
		return err
	}
	if err := p.writeFiles(ca.CertPEM, ca.KeyPEM, certPEM, keyPEM, st); err != nil {
		return err
	}
	log.Info("Starting a new cluster", "member", st.Name, "peer_url", st.AdvertisePeer, "client_url", st.AdvertiseClient)
	p.Config = Config{State: st, Paths: p.paths, Prefix: p.prefix, Token: p.token}
	return nil
}

// join runs the handshake with the member serving the API at joinURL and
// keeps the certificates it issues.
func (p *Provisioned) join(ctx context.Context, joinURL string, dir datadir.Layout, st State, hosts []string, log *slog.Logger) error {
	if _, err := os.Stat(p.paths.RestoreSnapshot); err == nil {
		return fmt.Errorf("%s holds a snapshot staged by leasehold restore: start the restored cluster with --cluster-init, or remove it to join another", p.paths.RestoreSnapshot)
	}
	if _, err := os.Stat(dir.Database()); err == nil {
		log.Warn("The single-device database is not imported by --join (the cluster's data wins); it stays as it is", "file", dir.Database())
	}
	resp, err := JoinWithRetry(ctx, joinURL, p.token, clusterapi.JoinRequest{
		Name: st.Name, PeerURL: st.AdvertisePeer, ClientURL: st.AdvertiseClient, Hosts: hosts}, log)
	if err != nil {
		return err
	}
	if err := p.writeFiles([]byte(resp.CACert), []byte(resp.CAKey), []byte(resp.Cert), []byte(resp.Key), st); err != nil {
		return err
	}
	log.Info("Joined the cluster as a learner", "member", st.Name, "via", joinURL, "initial_cluster", resp.InitialCluster)
	p.Config = Config{State: st, Paths: p.paths, InitialCluster: resp.InitialCluster, Join: true, Prefix: p.prefix, Token: p.token}
	return nil
}

// planImport marks a new cluster's state with the import of the data
// directory's single-device database, unless a restored snapshot is its
// data. The import itself runs before the member starts (PrepareData), and
// the file is kept beside, renamed.
func planImport(dir datadir.Layout, st *State, log *slog.Logger) error {
	paths := dir.Member()
	if _, err := os.Stat(paths.RestoreSnapshot); err == nil {
		log.Info("Starting the new cluster from the snapshot staged by leasehold restore", "snapshot", paths.RestoreSnapshot)
		return nil
	}
	src := dir.Database()
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	backup := dir.DatabaseImported()
	if _, err := os.Stat(backup); err == nil {
		return fmt.Errorf("%s is in the way of the backup of %s that the import keeps: move it elsewhere", backup, src)
	}
	st.Import = &ImportRecord{Source: src, Backup: backup}
	log.Info("The new cluster imports the single-device database (one-way); resourceVersions change", "file", src, "kept_as", backup)
	return nil
}

// clusterToken is --cluster-token-file, --cluster-token, or the token a
// previous start stored; a given one replaces the stored one.
func clusterToken(f Flags, paths Paths) ([]byte, error) {
	token, err := f.givenToken()
	if err != nil {
		return nil, err
	}
	if token != "" {
		if err := WriteFile(paths.TokenFile, []byte(token+"\n"), 0o600); err != nil {
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

// newMemberState names a new member and chooses its URLs; hosts are what
// its certificate covers.
func newMemberState(f Flags) (State, []string, error) {
	peerHost, peerPort, _ := net.SplitHostPort(f.PeerListen)
	clientListen := f.ClientListen
	if clientListen == "" {
		p, err := strconv.Atoi(peerPort)
		if err != nil || p < 2 {
			return State{}, nil, fmt.Errorf("--peer-listen %q: give a port number (or --cluster-client-listen)", f.PeerListen)
		}
		clientListen = net.JoinHostPort(peerHost, strconv.Itoa(p-1))
	}
	_, clientPort, _ := net.SplitHostPort(clientListen)
	advertise := f.AdvertiseHost
	if advertise == "" {
		advertise = peerHost
		if ip := net.ParseIP(peerHost); peerHost == "" || (ip != nil && ip.IsUnspecified()) {
			var err error
			if advertise, err = routeHost(f.Join); err != nil {
				return State{}, nil, fmt.Errorf("choose the address to advertise (give --advertise-host): %w", err)
			}
		}
	}
	name := f.Name
	if name == "" {
		host, _ := os.Hostname()
		name = host + "-" + peerPort
	}
	if !memberName.MatchString(name) {
		return State{}, nil, fmt.Errorf("invalid member name %q: use letters, digits, '.', '_' and '-' (at most 63)", name)
	}
	st := State{
		Name:            name,
		ListenPeer:      f.PeerListen,
		ListenClient:    clientListen,
		AdvertisePeer:   "https://" + net.JoinHostPort(advertise, peerPort),
		AdvertiseClient: "https://" + net.JoinHostPort(advertise, clientPort),
	}
	hosts := []string{advertise, "127.0.0.1", "::1", "localhost"}
	return st, hosts, nil
}

// memberName is what a member's or replica's name may be.
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

// writeFiles keeps the CA, the member's certificate and its state; the
// state last, as its presence says the member is complete.
func (p *Provisioned) writeFiles(caCert, caKey, cert, key []byte, st State) error {
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{p.paths.CAFile, caCert, 0o644}, {p.paths.CAKeyFile, caKey, 0o600},
		{p.paths.CertFile, cert, 0o644}, {p.paths.KeyFile, key, 0o600},
	} {
		if err := WriteFile(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	return SaveState(p.paths, st)
}
