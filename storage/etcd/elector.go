package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// errNotLeader: a campaign returned, but its key is not the leading one
// (its lease expired while it waited).
var errNotLeader = errors.New("campaign returned without the leading key")

// Campaign runs an etcd election (the concurrency package's recipe, as
// etcd's own v3election service) on a session lease of
// Options.ElectionTTL: the oldest live key under the election's prefix
// leads. A replica that crashes keeps leadership until its lease expires;
// one that stops resigns, so a successor takes over at once.
//
// Leadership is confirmed before it is reported: the recipe's Campaign
// only waits for the older keys to go, and never checks that its own key
// is still there. A campaigner whose lease expired while it waited (its
// member cut off from the leader for longer than the TTL) would "win"
// when the older key goes, together with the newer campaigner whose key
// now leads. Such a campaign starts again on a fresh lease.
func (s *Store) Campaign(ctx context.Context, name string) (<-chan struct{}, error) {
	for {
		lost, err := s.campaignOnce(ctx, name)
		if !errors.Is(err, errNotLeader) {
			return lost, err
		}
		s.log.Warn("Campaign returned without leadership; campaigning again", "election", name, "reason", err)
	}
}

// campaignOnce is one campaign on a fresh session lease; it fails with
// errNotLeader when the campaign returned but its key does not lead.
func (s *Store) campaignOnce(ctx context.Context, name string) (<-chan struct{}, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ttl := max(int(s.opts.ElectionTTL/time.Second), 1)
	// The lease is granted under ctx, so that a campaign against an
	// unreachable cluster ends with it; the session's keepalives must not
	// end with ctx, or leadership would be lost before the resignation.
	gctx, cancel := s.opCtx(ctx)
	lease, err := s.client.Grant(gctx, int64(ttl))
	cancel()
	if err != nil {
		return nil, s.wrapErr("election lease", err)
	}
	sess, err := concurrency.NewSession(s.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(ttl))
	if err != nil {
		return nil, s.wrapErr("election session", err)
	}
	prefix := ElectionPrefix(s.prefix, name)
	el := concurrency.NewElection(sess, prefix)
	// etcd's Campaign resigns a campaign whose ctx ended under the
	// client's own context, which ends only with the client: with no
	// member answering it held its caller (a replica's shutdown) until one
	// did. The caller returns when ctx ends; the campaign ends on its own
	// or with the client, and its lease is revoked or expires.
	campaigned := make(chan error, 1)
	go func() { campaigned <- el.Campaign(ctx, identity(s.opts.Identity)) }()
	select {
	case err = <-campaigned:
	case <-ctx.Done():
		go func() {
			<-campaigned
			_ = sess.Close()
		}()
		return nil, ctx.Err()
	}
	if err != nil {
		_ = sess.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.wrapErr("campaign "+name, err)
	}
	confirmed, err := s.confirmLeadership(ctx, prefix, el, lease.ID)
	if err != nil {
		// Revoking deletes the key if it is still there, so that the next
		// campaign does not wait behind it.
		_ = sess.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errNotLeader) {
			return nil, err
		}
		return nil, s.wrapErr("campaign "+name, err)
	}
	lost := make(chan struct{})
	unconfirmed := make(chan struct{})
	confirmCtx, stopConfirming := context.WithCancel(context.Background())
	s.wg.Go(func() { s.confirmLease(confirmCtx, lease.ID, time.Duration(ttl)*time.Second, confirmed, unconfirmed) })
	s.wg.Go(func() {
		defer close(lost)
		defer stopConfirming()
		select {
		case <-sess.Done():
			s.log.Warn("Election lease expired or could not be renewed", "election", name, "lease", int64(lease.ID))
			return
		case <-unconfirmed:
			s.log.Warn("Election lease expired or could not be renewed", "election", name, "lease", int64(lease.ID), "reason", "no renewal confirmed within two thirds of its TTL")
			// Revoking may take the whole TTL without a quorum: leadership
			// is given up now, the revocation follows.
			s.wg.Go(func() { _ = sess.Close() })
			return
		case <-ctx.Done():
		case <-s.done:
		}
		rctx, cancel := context.WithTimeout(context.Background(), s.opts.DialTimeout)
		defer cancel()
		if err := el.Resign(rctx); err != nil {
			s.log.Warn("Resigning failed; the lease expires instead", "election", name, "err", err)
		}
		_ = sess.Close()
	})
	return lost, nil
}

// confirmLeadership checks, after el's campaign returned, that its key
// leads: a linearizable read finds it first (lowest create revision)
// under the prefix, on lease id, and a renewal of id sent after that read
// is answered with the lease alive. Keys go with their lease, and no key
// can be created older than one that exists, so the key led when the
// renewal reached the leader. It returns when that renewal was sent.
func (s *Store) confirmLeadership(ctx context.Context, prefix string, el *concurrency.Election, id clientv3.LeaseID) (time.Time, error) {
	rctx, cancel := s.opCtx(ctx)
	defer cancel()
	resp, err := s.client.Get(rctx, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return time.Time{}, fmt.Errorf("confirm leadership: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return time.Time{}, fmt.Errorf("no key under %s: %w", prefix, errNotLeader)
	}
	first := resp.Kvs[0]
	if string(first.Key) != el.Key() || clientv3.LeaseID(first.Lease) != id || first.CreateRevision != el.Rev() {
		return time.Time{}, fmt.Errorf("%s leads, not %s: %w", first.Key, el.Key(), errNotLeader)
	}
	sent := time.Now()
	ka, err := s.client.KeepAliveOnce(clientv3.WithRequireLeader(rctx), id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return time.Time{}, fmt.Errorf("election lease %x: %w", id, errNotLeader)
	case err != nil:
		return time.Time{}, fmt.Errorf("confirm leadership: renew lease %x: %w", id, err)
	case ka.TTL <= 0:
		return time.Time{}, fmt.Errorf("election lease %x expired: %w", id, errNotLeader)
	}
	return sent, nil
}

// confirmLease renews the election lease itself every tenth of its ttl and
// closes unconfirmed once no renewal sent in the last two thirds of it was
// answered. Renewing often keeps the last answered renewal close to the
// moment answers stop: when the raft leader's member dies, renewals go
// unanswered until the survivors elect a new one (0.7-1.4 s), and with a
// renewal every third of the ttl (0.67 s) the holder often gave up its
// lease before that though it lived on (the new leader extends every
// lease). A renewal costs the leader a ReadIndex round, no disk write. The session's keepalive cannot tell in time: it counts the ttl
// from when an answer arrives, while the lease expires counting from when
// the leader renewed it, earlier; a member cut off from the others went on
// believing it led after the majority's campaign had won (seen with
// network partitions). A renewal is counted from when it was sent, which
// is before the leader renewed, and the last third is left for the work
// done as leader to stop.
func (s *Store) confirmLease(ctx context.Context, id clientv3.LeaseID, ttl time.Duration, confirmed time.Time, unconfirmed chan<- struct{}) {
	// confirmed is when the renewal that confirmed leadership was sent.
	// The next renewal goes out at once.
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		deadline := confirmed.Add(2 * ttl / 3)
		sent := time.Now()
		rctx, cancel := context.WithDeadline(clientv3.WithRequireLeader(ctx), deadline)
		resp, err := s.client.KeepAliveOnce(rctx, id)
		cancel()
		switch {
		case err == nil && resp.TTL > 0:
			confirmed, wait = sent, ttl/10
		case ctx.Err() != nil:
			return
		case !time.Now().Before(deadline):
			close(unconfirmed)
			return
		default:
			wait = 50 * time.Millisecond // retry until the deadline
		}
	}
}

// ElectionsPrefix is where every election's prefix (ElectionPrefix) lives.
func ElectionsPrefix(prefix string) string {
	return prefix + reservedDir + "elections/"
}

// ElectionPrefix is where the candidates' keys of election name live: the
// key with the lowest create revision belongs to the leader.
func ElectionPrefix(prefix, name string) string {
	return ElectionsPrefix(prefix) + name + "/"
}

// identity names this process in its election key, for operators: name
// (default the host name), process ID and a nonce.
func identity(name string) string {
	if name == "" {
		name, _ = os.Hostname()
	}
	return fmt.Sprintf("%s/%d/%s", name, os.Getpid(), uuid.NewString()[:8])
}

// ElectionLeader is the identity in the leading key of election name
// ("" while nobody leads), read linearizably: an operator's view must not
// name a leader the quorum has replaced. Without a quorum it fails
// (within Options.RequestTimeout, or ctx's deadline): who leads is then
// unknown. A serializable read of a member cut off from the others named
// the member itself, long after its leadership had ended.
func (s *Store) ElectionLeader(ctx context.Context, name string) (string, error) {
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	resp, err := s.get(clientv3.WithRequireLeader(ctx), ElectionPrefix(s.prefix, name), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", s.wrapErr("election leader "+name, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
