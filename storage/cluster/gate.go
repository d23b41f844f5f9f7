package cluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// gate is the member's client-port guard (trust.go says why it exists):
// gRPC interceptors on its embedded etcd that let a request through only
// when its client certificate was admitted, and a replica's only within
// leasehold's key range. It mirrors the credentials the cluster recorded
// through a watch on the member's own data (in-process, no network).
type gate struct {
	// prefix bounds a replica's keys: [prefix, prefixEnd).
	prefix, prefixEnd []byte
	// self is the member's own certificate, admitted before the record
	// is read (its own clients start with it).
	self string
	log  *slog.Logger
	// onToken is told the cluster token whenever the record changes it.
	onToken func(token []byte)
	// onRevoke is told each revoked fingerprint (the peer gate closes its
	// connections); set before the record is followed.
	onRevoke func(fp string)
	// onRotate is told when a rotation asks every certificate issued
	// before it to renew (rotateKey); set before the record is followed.
	onRotate func()

	// file keeps the record as last applied, for the peer gate of the
	// member's next start (before etcd has read its data).
	file string

	mu       sync.RWMutex
	loaded   bool
	fromFile bool // creds and enforce are file's, read at start
	enforce  bool
	token    []byte
	creds    map[string]Credential // by fingerprint
	// rotateAt is the last rotate-certs' time: certificates issued
	// before it renew.
	rotateAt time.Time
	// ca is the last CA rotation (carotate.go), nil when none; caAcks
	// what each member applied of it, by name.
	ca     *caRecord
	caAcks map[string]caAck
	// gone are the fingerprints whose credentials were deleted: their
	// streams end at their next message.
	gone map[string]bool
	// confirm looks a fingerprint the mirror lacks up in the record with
	// a linearizable read (set once the member's in-process client is).
	confirm func(ctx context.Context, fp string) (Credential, bool)
	// streams are the open streams of each certificate, cancelled when
	// its credential is deleted.
	streams map[string]map[*context.CancelFunc]struct{}
}

func newGate(prefix, self, file string, log *slog.Logger, onToken func([]byte)) *gate {
	g := &gate{prefix: []byte(prefix), prefixEnd: []byte(clientv3.GetPrefixRangeEnd(prefix)), self: self, log: log, file: file,
		onToken: onToken, creds: map[string]Credential{}, caAcks: map[string]caAck{}, gone: map[string]bool{}, streams: map[string]map[*context.CancelFunc]struct{}{}}
	if data, err := os.ReadFile(file); err == nil {
		var kept keptRecord
		if err := json.Unmarshal(data, &kept); err == nil && kept.Credentials != nil {
			g.creds, g.enforce, g.fromFile = kept.Credentials, kept.Enforce, true
		} else {
			log.Warn("The kept copy of the credentials record is unreadable; the peer port admits any member certificate of the CA until the record is read", "file", file, "err", err)
		}
	}
	return g
}

// keptRecord is the file copy of the record (trust.json).
type keptRecord struct {
	Enforce     bool                  `json:"enforce"`
	Credentials map[string]Credential `json:"credentials"`
}

// keep writes the record as this member applied it to the file,
// atomically; only the follow goroutine calls it.
func (g *gate) keep() {
	g.mu.RLock()
	data, err := json.MarshalIndent(keptRecord{Enforce: g.enforce, Credentials: g.creds}, "", "  ")
	g.mu.RUnlock()
	if err == nil {
		err = WriteFile(g.file, append(data, '\n'), 0o600)
	}
	if err != nil {
		g.log.Warn("Could not keep a copy of the credentials record", "file", g.file, "err", err)
	}
}

// serverOptions install the gate on the member's gRPC server.
func (g *gate) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.unary), grpc.ChainStreamInterceptor(g.stream)}
}

var (
	errNotAdmitted = status.Error(codes.PermissionDenied, "leasehold: this client certificate is not admitted to the cluster (its device was removed or revoked, or it was never issued by a join)")
	errNoCert      = status.Error(codes.Unauthenticated, "leasehold: a client certificate is required")
	errNotLoaded   = status.Error(codes.Unavailable, "leasehold: the member is still reading the cluster's credentials")
)

// identify finds the credential of the request's client certificate.
func (g *gate) identify(ctx context.Context) (string, Credential, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", Credential{}, errNoCert
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return "", Credential{}, errNoCert
	}
	leaf := info.State.PeerCertificates[0]
	fp := Fingerprint(leaf.Raw)
	if fp == g.self {
		return fp, Credential{Kind: KindMember}, nil
	}
	g.mu.RLock()
	loaded, enforce := g.loaded, g.enforce
	id, cred, known := g.lookupLocked(leaf, fp)
	confirm := g.confirm
	g.mu.RUnlock()
	switch {
	case !loaded:
		return fp, Credential{}, errNotLoaded
	case known:
		return id, cred, nil
	case enforce:
		// A device admitted a moment ago through another member may be
		// ahead of this member's mirror: a linearizable read decides.
		if confirm != nil {
			if cred, ok := confirm(ctx, fp); ok {
				return fp, cred, nil
			}
		}
		return fp, Credential{}, errNotAdmitted
	}
	// A cluster from before the record: any certificate of the CA, a
	// member's when it may serve (members' certificates serve both ports),
	// a replica's otherwise.
	kind := KindReplica
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth {
			kind = KindMember
		}
	}
	return fp, Credential{Kind: kind, Name: leaf.Subject.CommonName}, nil
}

// lookupLocked finds the credential of certificate leaf (fingerprint
// fp): its own, or one of the same key (a renewal keeps the key, and the
// record keeps a device's renewKeep newest certificates only). id is what
// its streams and connections are tracked by: the key's hash, or for a
// credential recorded before keys were, the fingerprint. g.mu is held.
func (g *gate) lookupLocked(leaf *x509.Certificate, fp string) (id string, cred Credential, ok bool) {
	if cred, ok = g.creds[fp]; ok {
		if cred.Key != "" {
			return cred.Key, cred, true
		}
		return fp, cred, true
	}
	kh := keyHash(leaf)
	for _, c := range g.creds {
		if c.Key == kh {
			return kh, c, true
		}
	}
	return fp, Credential{}, false
}

// keyHeldLocked reports whether a credential of key hash kh is recorded.
func (g *gate) keyHeldLocked(kh string) bool {
	for _, c := range g.creds {
		if c.Key == kh {
			return true
		}
	}
	return false
}

// revoked reports whether the credential of id (identify's), which passed
// identify, was deleted since.
func (g *gate) revoked(id string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.gone[id]
}

func (g *gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	_, cred, err := g.identify(ctx)
	if err != nil {
		return nil, err
	}
	if cred.Kind == KindReplica {
		if err := g.replicaUnary(info.FullMethod, req); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

func (g *gate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	fp, cred, err := g.identify(ss.Context())
	if err != nil {
		return err
	}
	replica := cred.Kind == KindReplica
	if replica && !replicaStreams[info.FullMethod] {
		return denied(info.FullMethod)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	g.mu.Lock()
	if g.streams[fp] == nil {
		g.streams[fp] = map[*context.CancelFunc]struct{}{}
	}
	g.streams[fp][&cancel] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.streams[fp], &cancel)
		if len(g.streams[fp]) == 0 {
			delete(g.streams, fp)
		}
		g.mu.Unlock()
	}()
	return handler(srv, &gatedStream{ServerStream: ss, ctx: ctx, g: g, fp: fp, replica: replica})
}

// gatedStream checks every message of a stream: the certificate must
// still be admitted, and a replica's watches must stay in its range.
type gatedStream struct {
	grpc.ServerStream
	ctx     context.Context
	g       *gate
	fp      string
	replica bool
}

func (s *gatedStream) Context() context.Context { return s.ctx }

func (s *gatedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.g.revoked(s.fp) {
		return errNotAdmitted
	}
	if w, ok := m.(*pb.WatchRequest); ok && s.replica {
		if cr := w.GetCreateRequest(); cr != nil && !s.g.inRange(cr.Key, cr.RangeEnd) {
			return outOfRange(cr.Key)
		}
	}
	return nil
}

func (s *gatedStream) SendMsg(m any) error {
	if s.g.revoked(s.fp) {
		return errNotAdmitted
	}
	return s.ServerStream.SendMsg(m)
}

// What a replica may call besides the key-value requests checked one by
// one: its leases (elections), the member list (its client follows the
// members), health checks. Not membership, maintenance (status, snapshots,
// defragmentation, alarms), compaction, or auth.
var (
	replicaUnaries = map[string]bool{
		"/etcdserverpb.Lease/LeaseGrant":      true,
		"/etcdserverpb.Lease/LeaseRevoke":     true,
		"/etcdserverpb.Lease/LeaseTimeToLive": true,
		"/etcdserverpb.Cluster/MemberList":    true,
		"/grpc.health.v1.Health/Check":        true,
	}
	replicaStreams = map[string]bool{
		"/etcdserverpb.Watch/Watch":          true,
		"/etcdserverpb.Lease/LeaseKeepAlive": true,
		"/grpc.health.v1.Health/Watch":       true,
	}
)

func denied(method string) error {
	return status.Errorf(codes.PermissionDenied, "leasehold: a replica may not call %s (membership, maintenance and compaction are the members')", method)
}

func outOfRange(key []byte) error {
	return status.Errorf(codes.PermissionDenied, "leasehold: key %q is outside the replicas' prefix", key)
}

// replicaUnary checks one unary request of a replica.
func (g *gate) replicaUnary(method string, req any) error {
	switch r := req.(type) {
	case *pb.RangeRequest:
		if !g.inRange(r.Key, r.RangeEnd) {
			return outOfRange(r.Key)
		}
		return nil
	case *pb.PutRequest:
		if !g.inRange(r.Key, nil) {
			return outOfRange(r.Key)
		}
		return nil
	case *pb.DeleteRangeRequest:
		if !g.inRange(r.Key, r.RangeEnd) {
			return outOfRange(r.Key)
		}
		return nil
	case *pb.TxnRequest:
		return g.replicaTxn(r)
	}
	if !replicaUnaries[method] {
		return denied(method)
	}
	return nil
}

func (g *gate) replicaTxn(t *pb.TxnRequest) error {
	for _, c := range t.Compare {
		if !g.inRange(c.Key, c.RangeEnd) {
			return outOfRange(c.Key)
		}
	}
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			var err error
			switch r := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				err = g.replicaUnary("", r.RequestRange)
			case *pb.RequestOp_RequestPut:
				err = g.replicaUnary("", r.RequestPut)
			case *pb.RequestOp_RequestDeleteRange:
				err = g.replicaUnary("", r.RequestDeleteRange)
			case *pb.RequestOp_RequestTxn:
				err = g.replicaTxn(r.RequestTxn)
			default:
				err = denied("an unknown transaction operation")
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// inRange reports whether the key (or the range [key, end)) lies in
// [prefix, prefixEnd). etcd's end "\x00" means "every key from key on".
func (g *gate) inRange(key, end []byte) bool {
	if !bytes.HasPrefix(key, g.prefix) {
		return false
	}
	if len(end) == 0 {
		return true
	}
	if len(end) == 1 && end[0] == 0 {
		return false
	}
	return bytes.Compare(end, g.prefixEnd) <= 0
}

// follow reads the record from the member's own data (c is in-process),
// then follows it until ctx ends; loaded is closed after the first read.
func (g *gate) follow(ctx context.Context, c *clientv3.Client, loaded chan<- struct{}) {
	first := true
	for ctx.Err() == nil {
		rev, err := g.load(ctx, c)
		if err != nil {
			g.log.Warn("Reading the cluster's credentials; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		g.keep()
		if first {
			close(loaded)
			first = false
		}
		// Without WithRequireLeader: the record is this member's applied
		// data, which a member cut off from its leader still holds.
		for resp := range c.Watch(ctx, trustPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if err := resp.Err(); err != nil {
				g.log.Info("Following the cluster's credentials again", "err", err)
				break
			}
			for _, ev := range resp.Events {
				g.apply(ev.Kv.Key, ev.Kv.Value, ev.Type == mvccpb.DELETE)
			}
			g.keep()
		}
		select { // a watch that keeps failing is not retried in a tight loop
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// load replaces the mirror with the record as this member applied it,
// in one swap: no request sees a half-read record.
func (g *gate) load(ctx context.Context, c *clientv3.Client) (int64, error) {
	resp, err := c.Get(ctx, trustPrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		return 0, err
	}
	creds, enforce := map[string]Credential{}, false
	var token, rotate []byte
	var ca *caRecord
	acks := map[string]caAck{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case k == caKey:
			rec, err := parseCARecord(kv.Value)
			if err != nil {
				g.log.Warn("An unreadable CA rotation in the cluster's record is ignored", "err", err)
				continue
			}
			ca = rec
		case strings.HasPrefix(k, caMembersPrefix):
			var a caAck
			if json.Unmarshal(kv.Value, &a) == nil {
				acks[strings.TrimPrefix(k, caMembersPrefix)] = a
			}
		case strings.HasPrefix(k, credentialsPrefix):
			var cred Credential
			if err := json.Unmarshal(kv.Value, &cred); err != nil {
				g.log.Warn("An unreadable credential in the cluster's record is ignored", "key", k, "err", err)
				continue
			}
			creds[strings.TrimPrefix(k, credentialsPrefix)] = cred
		case k == enforceKey:
			enforce = true
		case k == tokenKey:
			token = kv.Value
		case k == rotateKey:
			rotate = kv.Value
		}
	}
	g.mu.Lock()
	old := g.creds
	g.creds, g.enforce, g.loaded, g.fromFile = creds, enforce, true, false
	caChanged := ca != nil && (g.ca == nil || g.ca.Phase != ca.Phase || !g.ca.Started.Equal(ca.Started))
	g.ca, g.caAcks = ca, acks
	var dropped []string
	for fp, c := range old {
		if _, ok := creds[fp]; !ok && enforce {
			g.gone[fp] = true
			if c.Key == "" {
				dropped = append(dropped, fp)
			}
			if c.Key != "" && !g.keyHeldLocked(c.Key) {
				g.gone[c.Key] = true
				dropped = append(dropped, c.Key)
			}
		}
	}
	for fp, c := range creds {
		delete(g.gone, fp)
		delete(g.gone, c.Key)
	}
	g.mu.Unlock()
	for _, fp := range dropped {
		g.cancelStreams(fp)
	}
	if token != nil {
		g.apply([]byte(tokenKey), token, false)
	}
	if rotate != nil {
		g.apply([]byte(rotateKey), rotate, false)
	}
	if caChanged && g.onRotate != nil {
		g.onRotate()
	}
	return resp.Header.Revision, nil
}

// apply mirrors one change of the record.
func (g *gate) apply(key, value []byte, deleted bool) {
	k := string(key)
	switch {
	case strings.HasPrefix(k, credentialsPrefix):
		fp := strings.TrimPrefix(k, credentialsPrefix)
		if deleted {
			g.mu.Lock()
			cred, had := g.creds[fp]
			delete(g.creds, fp)
			g.gone[fp] = true
			// A renewal drops older certificates of a key the device
			// still holds: only the last credential of a key closes
			// the connections of that key.
			keyGone := had && cred.Key != "" && !g.keyHeldLocked(cred.Key)
			if keyGone {
				g.gone[cred.Key] = true
			}
			g.mu.Unlock()
			switch {
			case keyGone:
				g.log.Info("A credential was revoked; its connections are closed", "kind", cred.Kind, "name", cred.Name)
				g.cancelStreams(cred.Key)
			case cred.Key == "":
				if had {
					g.log.Info("A credential was revoked; its connections are closed", "kind", cred.Kind, "name", cred.Name)
				}
				g.cancelStreams(fp)
			}
			return
		}
		var cred Credential
		if err := json.Unmarshal(value, &cred); err != nil {
			g.log.Warn("An unreadable credential in the cluster's record is ignored", "key", k, "err", err)
			return
		}
		g.mu.Lock()
		g.creds[fp] = cred
		delete(g.gone, fp)
		delete(g.gone, cred.Key)
		g.mu.Unlock()
	case k == enforceKey:
		g.mu.Lock()
		g.enforce = !deleted
		g.mu.Unlock()
	case k == caKey && !deleted:
		rec, err := parseCARecord(value)
		if err != nil {
			g.log.Warn("An unreadable CA rotation in the cluster's record is ignored", "err", err)
			return
		}
		g.mu.Lock()
		g.ca = rec
		g.mu.Unlock()
		// The member's files follow it, then its certificate
		// (renewMember).
		if g.onRotate != nil {
			g.onRotate()
		}
	case strings.HasPrefix(k, caMembersPrefix):
		name := strings.TrimPrefix(k, caMembersPrefix)
		var a caAck
		g.mu.Lock()
		if deleted || json.Unmarshal(value, &a) != nil {
			delete(g.caAcks, name)
		} else {
			g.caAcks[name] = a
		}
		g.mu.Unlock()
	case k == rotateKey && !deleted:
		at, err := time.Parse(time.RFC3339Nano, string(value))
		if err != nil {
			g.log.Warn("An unreadable certificate rotation in the cluster's record is ignored", "err", err)
			return
		}
		g.mu.Lock()
		changed := !at.Equal(g.rotateAt)
		g.rotateAt = at
		g.mu.Unlock()
		if changed && g.onRotate != nil {
			g.onRotate()
		}
	case k == tokenKey && !deleted:
		g.mu.Lock()
		changed := !bytes.Equal(g.token, value)
		g.token = bytes.Clone(value)
		g.mu.Unlock()
		if changed && g.onToken != nil {
			g.onToken(bytes.Clone(value))
		}
	}
}

// cancelStreams ends the open streams of certificate fp, and its peer
// connections.
func (g *gate) cancelStreams(fp string) {
	if g.onRevoke != nil {
		g.onRevoke(fp)
	}
	g.mu.Lock()
	var cancels []context.CancelFunc
	for c := range g.streams[fp] {
		cancels = append(cancels, *c)
	}
	g.mu.Unlock()
	for _, c := range cancels {
		c()
	}
}

// currentToken is the cluster token of the record, nil when the cluster
// keeps none there (created before it did).
func (g *gate) currentToken() []byte {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.token
}
