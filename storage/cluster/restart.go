package cluster

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
)

// restartState is the state a member restarts with: the recorded one,
// with the address flags given to this start applied where that is safe,
// and refused with the reason where it is not. Its listeners may move (a
// listener is this device's business) and its client URL too (etcd
// publishes a member's client URLs to the cluster at every start), but
// not its name or peer URL: the other members know it by them, and etcd
// moves a peer URL only with a member update through the quorum, which
// leasehold does not do. A change is recorded before the member starts.
func restartState(st State, f Flags, paths Paths, log *slog.Logger) (State, error) {
	if f.given("member-name") && f.Name != st.Name {
		return st, fmt.Errorf("--member-name %s: the member in %s is %s, and a member keeps its name (the cluster knows it by it): "+
			"drop the flag, or join as a new member from another --data-dir", f.Name, paths.Dir, st.Name)
	}
	next := st
	advHost, peerPort, err := urlHostPort(st.AdvertisePeer)
	if err != nil {
		return st, err
	}
	_, clientPort, err := urlHostPort(st.AdvertiseClient)
	if err != nil {
		return st, err
	}
	if f.given("peer-listen") {
		host, port, _ := net.SplitHostPort(f.PeerListen)
		next.ListenPeer, peerPort = f.PeerListen, port
		// As at the first start: the listener's host is the advertised
		// one unless it is a wildcard.
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			advHost = host
		}
	}
	if f.given("cluster-client-listen") && f.ClientListen != "" {
		_, port, _ := net.SplitHostPort(f.ClientListen)
		next.ListenClient, clientPort = f.ClientListen, port
	}
	if f.given("advertise-host") && f.AdvertiseHost != "" {
		advHost = f.AdvertiseHost
	}
	next.AdvertisePeer = "https://" + net.JoinHostPort(advHost, peerPort)
	next.AdvertiseClient = "https://" + net.JoinHostPort(advHost, clientPort)
	if next.AdvertisePeer != st.AdvertisePeer {
		return st, fmt.Errorf("member %s: the flags given would move its peer URL from %s to %s, and the other members know it by "+
			"that URL (etcd's membership): moving it needs a member update through the quorum, which leasehold does not do. "+
			"Restart without --peer-listen/--advertise-host to keep %s (recorded in %s), "+
			"or remove the member (leasehold cluster remove %s, on another member), empty %s and --join again at the new address",
			st.Name, st.AdvertisePeer, next.AdvertisePeer, st.AdvertisePeer, paths.State, st.Name, paths.Dir)
	}
	if next == st {
		return st, nil
	}
	log.Info("The member's listeners moved; etcd publishes its client URL to the other members as it starts",
		"member", st.Name, "peer_listen", next.ListenPeer, "client_listen", next.ListenClient, "client_url", next.AdvertiseClient,
		"before", st.ListenPeer+" "+st.ListenClient+" "+st.AdvertiseClient)
	if err := SaveState(paths, next); err != nil {
		return st, err
	}
	return next, nil
}

// urlHostPort splits a member URL (https://host:port).
func urlHostPort(raw string) (host, port string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		return "", "", fmt.Errorf("cluster state: invalid member URL %q", raw)
	}
	return u.Hostname(), u.Port(), nil
}
