package etcd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Campaign runs an etcd election (the concurrency package's recipe, as
// etcd's own v3election service) on a session lease of
// Options.ElectionTTL: the oldest live key under the election's prefix
// leads. A replica that crashes keeps leadership until its lease expires;
// one that stops resigns, so a successor takes over at once.
func (s *Store) Campaign(ctx context.Context, name string) (<-chan struct{}, error) {
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
	el := concurrency.NewElection(sess, ElectionPrefix(s.prefix, name))
	if err := el.Campaign(ctx, identity(s.opts.Identity)); err != nil {
		_ = sess.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.wrapErr("campaign "+name, err)
	}
	lost := make(chan struct{})
	s.wg.Go(func() {
		defer close(lost)
		select {
		case <-sess.Done():
			s.log.Warn("Election lease expired or could not be renewed", "election", name)
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

// ElectionPrefix is where the candidates' keys of election name live: the
// key with the lowest create revision belongs to the leader.
func ElectionPrefix(prefix, name string) string {
	return prefix + reservedDir + "elections/" + name + "/"
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
// ("" while nobody leads), read from the local member without a quorum
// (serializable): an operator's view, which must answer when the cluster
// has none.
func (s *Store) ElectionLeader(ctx context.Context, name string) (string, error) {
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	opts := append(clientv3.WithFirstCreate(), clientv3.WithSerializable())
	resp, err := s.client.Get(ctx, ElectionPrefix(s.prefix, name), opts...)
	if err != nil {
		return "", s.wrapErr("election leader "+name, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
