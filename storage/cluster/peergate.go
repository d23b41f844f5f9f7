package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// peerGate is the member's public peer port. etcd's own peer listener
// checks a certificate against the CA, and every member holds the CA's
// key: a stolen device could mint a certificate that passes, dial a
// member's peer port and send raft messages in another member's name.
// So etcd listens for peers on loopback only, and the peer port the other
// members dial is this gate: TLS with the member's certificate, and a
// client certificate that must be a member's in the cluster's record
// (trust.go), checked at each handshake; a revoked member's open
// connections are closed. Until the member has read the record at start
// (seconds; its raft must run to get there), it goes by the copy it kept
// in its data directory (trust.json) when it last ran; a member that
// never ran (a joiner's first start) accepts any member certificate of
// the CA, as etcd did. A restarting member that missed a join refuses the
// newcomer's dials until it has caught up, which it does over its own
// dials (raft's stream readers and pipeline are the dialer's).
type peerGate struct {
	ln      net.Listener
	backend string
	g       *gate
	log     *slog.Logger
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns map[string]map[net.Conn]struct{} // by fingerprint
	done  bool
}

// startPeerGate serves the public peer port ln (bound by the caller before
// etcd starts) and forwards admitted connections to
// etcd's loopback peer listener at backend.
func startPeerGate(ln net.Listener, backend string, paths Paths, g *gate, log *slog.Logger) (*peerGate, error) {
	caPEM, err := os.ReadFile(paths.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: peer port: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cluster: peer port: no CA certificate in %s", paths.CAFile)
	}
	if _, err := tls.LoadX509KeyPair(paths.CertFile, paths.KeyFile); err != nil {
		return nil, fmt.Errorf("cluster: peer port: %w", err)
	}
	pg := &peerGate{backend: backend, g: g, log: log, conns: map[string]map[net.Conn]struct{}{}}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Read at each handshake, as etcd's own listeners do: a renewal
		// (renew.go) swaps the certificate file, the key stays.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			pair, err := tls.LoadX509KeyPair(paths.CertFile, paths.KeyFile)
			return &pair, err
		},
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  pool,
		// No ALPN: etcd's loopback listener speaks HTTP/1.1 without TLS.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("a member certificate is required")
			}
			return g.peerAdmitted(cs.PeerCertificates[0])
		},
	}
	pg.ln = tls.NewListener(ln, cfg)
	g.onRevoke = pg.closeConns
	pg.wg.Add(1)
	go pg.serve()
	return pg, nil
}

func (pg *peerGate) serve() {
	defer pg.wg.Done()
	for {
		conn, err := pg.ln.Accept()
		if err != nil {
			pg.mu.Lock()
			done := pg.done
			pg.mu.Unlock()
			if done {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			pg.log.Warn("The peer port stopped accepting", "err", err)
			return
		}
		pg.wg.Add(1)
		go pg.forward(conn.(*tls.Conn))
	}
}

// forward hands one admitted connection to etcd.
func (pg *peerGate) forward(conn *tls.Conn) {
	defer pg.wg.Done()
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := conn.HandshakeContext(ctx)
	cancel()
	if err != nil {
		pg.log.Debug("A peer connection was refused", "remote", conn.RemoteAddr().String(), "err", err)
		return
	}
	// Tracked by the certificate and by its key: a revocation closes
	// either (gate.go's lookupLocked).
	leaf := conn.ConnectionState().PeerCertificates[0]
	fp, kh := Fingerprint(leaf.Raw), keyHash(leaf)
	if !pg.track(fp, conn, true) || !pg.track(kh, conn, true) {
		pg.track(fp, conn, false)
		return
	}
	defer pg.track(fp, conn, false)
	defer pg.track(kh, conn, false)
	back, err := net.DialTimeout("tcp", pg.backend, 5*time.Second)
	if err != nil {
		pg.log.Warn("The peer port could not reach etcd", "err", err)
		return
	}
	defer back.Close()
	// A write to the public side is bounded as etcd bounds its own peer
	// writes (rafthttp's 5 s): a connection into a partition ends instead
	// of hiding the cut behind this copy. Reads are not: a raft stream
	// carries messages one way only, and the dialer reads with its own
	// timeout.
	pub := deadlineConn{Conn: conn, d: peerConnTimeout}
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(back, pub); errc <- err }()
	go func() { _, err := io.Copy(pub, back); errc <- err }()
	<-errc // either side ends: both close (deferred), which ends the other copy
}

// peerConnTimeout is etcd's rafthttp.ConnWriteTimeout.
const peerConnTimeout = 5 * time.Second

// deadlineConn bounds each write by d.
type deadlineConn struct {
	net.Conn
	d time.Duration
}

func (c deadlineConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.d))
	return c.Conn.Write(b)
}

// track adds (or removes) an open connection of certificate fp; it
// refuses to add one once the gate is closed or the certificate revoked.
func (pg *peerGate) track(fp string, conn net.Conn, add bool) bool {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if !add {
		delete(pg.conns[fp], conn)
		if len(pg.conns[fp]) == 0 {
			delete(pg.conns, fp)
		}
		return true
	}
	if pg.done {
		return false
	}
	if pg.conns[fp] == nil {
		pg.conns[fp] = map[net.Conn]struct{}{}
	}
	pg.conns[fp][conn] = struct{}{}
	return true
}

// closeConns closes the open peer connections of a revoked certificate.
func (pg *peerGate) closeConns(fp string) {
	pg.mu.Lock()
	var conns []net.Conn
	for c := range pg.conns[fp] {
		conns = append(conns, c)
	}
	pg.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Close stops accepting and closes every forwarded connection.
func (pg *peerGate) Close() {
	pg.mu.Lock()
	if pg.done {
		pg.mu.Unlock()
		return
	}
	pg.done = true
	var conns []net.Conn
	for _, m := range pg.conns {
		for c := range m {
			conns = append(conns, c)
		}
	}
	pg.mu.Unlock()
	_ = pg.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	pg.wg.Wait()
}

// peerAdmitted decides a peer connection: a member's certificate in the
// record once it is read, or in the kept copy before (or any on a cluster
// from before the record); with neither, any certificate of the CA that a
// member's could be (it names memberCertHost, which no replica's does).
func (g *gate) peerAdmitted(leaf *x509.Certificate) error {
	fp := Fingerprint(leaf.Raw)
	if fp == g.self {
		return nil
	}
	g.mu.RLock()
	known, enforce := g.loaded || g.fromFile, g.enforce
	_, cred, ok := g.lookupLocked(leaf, fp)
	g.mu.RUnlock()
	if known && enforce {
		if !ok || cred.Kind != KindMember {
			return errors.New("this certificate is not a member's of the cluster (removed, or never issued by a join)")
		}
		return nil
	}
	if err := leaf.VerifyHostname(memberCertHost); err != nil {
		return errors.New("this certificate is not a member's")
	}
	return nil
}
