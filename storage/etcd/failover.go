package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A store with several endpoints and a RequestTimeout (an API-only
// replica of an embedded cluster) sends its reads and writes through a
// pool, one connection per endpoint, instead of the etcd client's
// round-robin balancer: the balancer keeps sending every third request to
// a member that is cut off (its connection is open but nothing comes
// back) until gRPC keepalives give up on it, half a minute later.
//
// The pool sends every request to the endpoint whose last request
// succeeded, and a prober keeps every other endpoint's health: an endpoint
// that has not answered for a probe interval gets a linearizable read, and
// one whose probe fails (no leader, refused) or times out while another
// endpoint answers is sick (one that timed out while none answered is
// sent again at once). Requests in flight on an endpoint that falls sick
// end at once: a read is sent again elsewhere; a write, whose outcome is
// then unknown, is settled by what became of its key (settle.go), else
// fails with a timeout (storage.ErrTimeout, a 504); it never applies
// twice. A raft term newer than the one a request was sent in
// ends it the same way: a proposal forwarded to a leader that has since
// been replaced waits, unanswered, for the whole timeout. The endpoint
// that answered in the new term takes the requests at once: when the
// member cut off is the raft leader, the others answer nothing until they
// elect a new one, and the prober would find the old leader sick only a
// probe timeout after that. A request that surely was not applied (no
// leader, connection refused, proposal dropped) is sent again on another
// endpoint within the timeout; a read answered "leader changed" on the
// same one, which knows the new leader.

// errOutcomeUnknown ends a write that was sent but not answered: its
// endpoint fell sick, a new raft term began, or its connection broke.
var errOutcomeUnknown = errors.New("the write was sent but not answered; it may or may not have been applied")

// errLearner is a learner's refusal (the member list may name one).
var errLearner = rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner)

// pool is the failover of a store's reads and writes.
type pool struct {
	s       *Store
	timeout time.Duration // Options.RequestTimeout
	// interval is how often endpoints without a recent answer are probed;
	// probeTimeout how long a probe may take.
	interval, probeTimeout time.Duration

	mu        sync.Mutex
	eps       []*endpoint
	preferred *endpoint
	// term is the highest raft term seen in an answer; termChanged ends
	// when a higher one is seen (requests sent before it end with it).
	term        uint64
	termChanged context.Context
	newTerm     context.CancelFunc
}

// endpoint is one member's client URL, with its own connection.
type endpoint struct {
	url    string
	client *clientv3.Client
	// Guarded by pool.mu.
	sick    bool
	probing bool
	lastOK  time.Time // when its last successful answer arrived
	dialed  time.Time // when client was made
	// healthy ends when the endpoint falls sick, ending the requests in
	// flight on it.
	healthy context.Context
	fall    context.CancelFunc
}

func newPool(s *Store, urls []string) (*pool, error) {
	p := &pool{s: s, timeout: s.opts.RequestTimeout}
	// Probing every fifteenth of the request timeout (200ms at the default
	// 3s) and giving a probe three intervals finds a member cut off within
	// about four intervals; a shorter probe timeout took healthy members of
	// a busy machine for sick (a request in flight on the preferred one
	// then ends: a write with a 504).
	p.interval = max(s.opts.RequestTimeout/15, 20*time.Millisecond)
	p.probeTimeout = 3 * p.interval
	p.termChanged, p.newTerm = context.WithCancel(context.Background())
	if err := p.sync(urls); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// sync makes the pool's endpoints urls: new ones are connected (without
// waiting: a dead member must not delay the others), gone ones closed.
func (p *pool) sync(urls []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keep []*endpoint
	for _, e := range p.eps {
		if slices.Contains(urls, e.url) {
			keep = append(keep, e)
			continue
		}
		e.fall()
		_ = e.client.Close()
		if p.preferred == e {
			p.preferred = nil
		}
	}
	for _, u := range urls {
		if slices.ContainsFunc(keep, func(e *endpoint) bool { return e.url == u }) {
			continue
		}
		c, err := p.dial(u)
		if err != nil {
			return err
		}
		e := &endpoint{url: u, client: c, dialed: time.Now()}
		e.healthy, e.fall = context.WithCancel(context.Background())
		keep = append(keep, e)
	}
	p.eps = keep
	if p.preferred == nil && len(keep) > 0 {
		p.preferred = keep[0]
	}
	return nil
}

// dial makes an endpoint's client, without waiting for its connection.
func (p *pool) dial(url string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{url},
		TLS:       p.s.opts.TLS,
		Logger:    newZapLogger(p.s.opts.Logger),
		// Not DialTimeout: that would make New wait for the connection.
		DialKeepAliveTime:    5 * p.s.opts.DialTimeout,
		DialKeepAliveTimeout: p.s.opts.DialTimeout,
		MaxCallSendMsgSize:   p.s.opts.MaxValueBytes + 1<<20,
		MaxUnaryRetries:      1, // the pool retries, elsewhere
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return c, nil
}

// redial replaces the connection of e, sick for a while: a connection
// that stalled while its member was cut off resumes only at TCP's next
// retransmission after the member is back, which backs off to many
// seconds.
func (p *pool) redial(e *endpoint) {
	c, err := p.dial(e.url)
	if err != nil {
		p.s.log.Warn("Reconnecting to a sick etcd endpoint failed", "endpoint", e.url, "err", err)
		return
	}
	p.mu.Lock()
	old := e.client
	e.client, e.dialed = c, time.Now()
	closed := !slices.Contains(p.eps, e)
	p.mu.Unlock()
	_ = old.Close()
	if closed {
		_ = c.Close()
	}
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.eps {
		e.fall()
		_ = e.client.Close()
	}
	p.eps = nil
	p.newTerm()
}

// do runs op, a read or a write, on a healthy endpoint within the request
// timeout, sending it again elsewhere when that is safe (see above).
func (p *pool) do(ctx context.Context, write bool, op func(ctx context.Context, c *clientv3.Client) (uint64, error)) error {
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), p.timeout)
	defer cancel()
	var tried []*endpoint
	var last error
	var again *endpoint // the endpoint to try next, whatever pick prefers
	for {
		e, client, healthy, termChanged := p.pick(tried, again)
		again = nil
		if e == nil {
			// Every endpoint failed this round (an election under way):
			// a short pause, and another round.
			select {
			case <-ctx.Done():
				if last == nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
			case <-time.After(p.interval / 2):
			}
			tried = tried[:0]
			continue
		}
		tried = append(tried, e)
		actx, abort := context.WithCancel(ctx)
		stopHealthy := context.AfterFunc(healthy, abort)
		stopTerm := context.AfterFunc(termChanged, abort)
		term, err := op(actx, client)
		stopHealthy()
		stopTerm()
		abort()
		if term > 0 {
			p.sawTerm(term, e)
		}
		switch {
		case err == nil || definite(err):
			p.answered(e, true)
			return err
		case ctx.Err() != nil:
			return err
		case notApplied(err):
			p.fell(e, err)
		case !write && leaderChanged(err):
			// e's member knows a new leader, which answers it a moment
			// later: e is tried again after a pause (others may still
			// wait for the old leader).
			tried = slices.DeleteFunc(tried, func(t *endpoint) bool { return t == e })
			again = e
			select {
			case <-ctx.Done():
				return err
			case <-time.After(readRetryPause):
			}
		case healthy.Err() != nil || termChanged.Err() != nil:
			// Ended by the pool: the endpoint fell sick, or a new term
			// began.
			if write {
				return fmt.Errorf("%s: %w", e.url, errOutcomeUnknown)
			}
		case write:
			return fmt.Errorf("%s: %w: %w", e.url, errOutcomeUnknown, err)
		}
		last = err
	}
}

// pick is the endpoint for the next attempt: want if it is still in the
// pool, else the preferred one if it is healthy, else another healthy
// one, else a sick one not tried yet (it may have recovered since its
// last probe); nil once every endpoint was tried, with its client. The
// contexts end the attempt: healthy when the endpoint falls sick (never,
// for one already sick), termChanged with a new raft term.
func (p *pool) pick(tried []*endpoint, want *endpoint) (*endpoint, *clientv3.Client, context.Context, context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var chosen *endpoint
	if want != nil && slices.Contains(p.eps, want) {
		chosen = want
	}
	if e := p.preferred; chosen == nil && e != nil && !e.sick && !slices.Contains(tried, e) {
		chosen = e
	}
	for _, sick := range []bool{false, true} {
		for _, e := range p.eps {
			if chosen == nil && e.sick == sick && !slices.Contains(tried, e) {
				chosen = e
			}
		}
	}
	if chosen == nil {
		return nil, nil, nil, nil
	}
	healthy := chosen.healthy
	if chosen.sick {
		healthy = context.Background()
	}
	return chosen, chosen.client, healthy, p.termChanged
}

// healthyFirst lists the endpoints, the preferred first and the sick last.
func (p *pool) healthyFirst() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var urls []string
	if p.preferred != nil && !p.preferred.sick {
		urls = append(urls, p.preferred.url)
	}
	for _, sick := range []bool{false, true} {
		for _, e := range p.eps {
			if e.sick == sick && !slices.Contains(urls, e.url) {
				urls = append(urls, e.url)
			}
		}
	}
	return urls
}

// answered records that e answered: it is healthy, and, for a request
// rather than a probe, the preferred endpoint.
func (p *pool) answered(e *endpoint, prefer bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.lastOK = time.Now()
	p.wellLocked(e)
	if prefer && p.preferred != e {
		prev := "(none)"
		if p.preferred != nil {
			prev = p.preferred.url
		}
		p.preferred = e
		p.s.log.Info("etcd requests move to another endpoint", "endpoint", e.url, "from", prev)
	}
}

// wellLocked marks e healthy again, with p.mu held.
func (p *pool) wellLocked(e *endpoint) {
	if e.sick {
		e.sick = false
		e.healthy, e.fall = context.WithCancel(context.Background())
		p.s.log.Info("etcd endpoint answers again", "endpoint", e.url)
	}
}

// fell marks e sick: its requests in flight end, and new ones go
// elsewhere until a probe or a request succeeds on it again.
func (p *pool) fell(e *endpoint, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.sick || !slices.Contains(p.eps, e) {
		return
	}
	e.sick = true
	e.fall()
	p.s.log.Warn("etcd endpoint is sick; requests go to the others", "endpoint", e.url, "err", err)
}

// sawTerm notes a raft term from an answer's header, which e gave; a
// higher one ends the requests sent before it, and moves the requests to
// e. The endpoint preferred until then may be the old leader's member, cut
// off: its requests hang until a probe finds it sick, up to a probe
// timeout after the others answer again, while e answered in the new
// term, with a leader and a quorum behind it.
func (p *pool) sawTerm(term uint64, e *endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if term <= p.term {
		return
	}
	if p.term != 0 {
		p.newTerm()
		p.termChanged, p.newTerm = context.WithCancel(context.Background())
		// e may be marked sick (a probe during the election answered "no
		// leader"): this answer shows it well again (before the requests
		// just ended pick their next endpoint).
		if p.preferred != e && slices.Contains(p.eps, e) {
			p.wellLocked(e)
			prev := "(none)"
			if p.preferred != nil {
				prev = p.preferred.url
			}
			p.preferred = e
			p.s.log.Info("etcd requests move to another endpoint", "endpoint", e.url, "from", prev, "term", term)
		}
	}
	p.term = term
}

// probeLoop probes, every interval, each endpoint that did not answer in
// the last half interval (the preferred one, busy with requests, rarely
// needs it), and follows the client's endpoint list (kept
// up to date from the member list by AutoSyncInterval).
func (p *pool) probeLoop() {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.s.done:
			return
		case <-t.C:
		}
		urls := p.s.client.Endpoints()
		p.mu.Lock()
		same := len(urls) == len(p.eps)
		for _, e := range p.eps {
			same = same && slices.Contains(urls, e.url)
		}
		p.mu.Unlock()
		if !same {
			if err := p.sync(urls); err != nil {
				p.s.log.Warn("Following the etcd endpoints failed", "endpoints", strings.Join(urls, ","), "err", err)
			}
		}
		now := time.Now()
		p.mu.Lock()
		for _, e := range p.eps {
			if e.probing || now.Sub(e.lastOK) < p.interval/2 {
				continue
			}
			e.probing = true
			client := e.client
			p.s.wg.Go(func() { p.probe(e, client) })
		}
		p.mu.Unlock()
	}
}

// probe sends e a linearizable read of the store's reserved key: it needs
// a leader and a quorum behind the endpoint, as every request does.
func (p *pool) probe(e *endpoint, client *clientv3.Client) {
	for p.probeOnce(e, client) {
	}
}

// probeOnce is one probe of e; it reports whether to probe e again at
// once: its probe timed out and found nothing (every endpoint is slow,
// as while the members elect a leader). The next probe is then in flight
// when e's member sees the new leader, and its answer moves the requests
// (sawTerm) without waiting for the next interval.
func (p *pool) probeOnce(e *endpoint, client *clientv3.Client) (again bool) {
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(context.Background()), p.probeTimeout)
	defer cancel()
	sent := time.Now()
	resp, err := client.Get(ctx, p.s.metaKey, clientv3.WithCountOnly())
	for leaderChanged(err) {
		// The endpoint's member just saw a new leader, which answers a
		// moment later: that answer, with the new term, is what moves the
		// requests off a leader that was cut off (sawTerm), so it is
		// asked for at once rather than at the next interval.
		select {
		case <-ctx.Done():
		case <-time.After(readRetryPause):
			resp, err = client.Get(ctx, p.s.metaKey, clientv3.WithCountOnly())
			continue
		}
		break
	}
	if resp != nil {
		p.sawTerm(resp.Header.RaftTerm, e)
	}
	p.mu.Lock()
	// A probe that timed out shows a sick endpoint only if another one
	// answered while it waited (the others are probed every interval, a
	// third of the probe's timeout): when all are slow (a busy machine, an
	// election), none is better than the others.
	othersAnswer := false
	for _, o := range p.eps {
		othersAnswer = othersAnswer || (o != e && !o.sick && o.lastOK.After(sent.Add(p.probeTimeout/4)))
	}
	stale := e.sick && client == e.client && time.Since(e.dialed) > 5*p.interval
	again = err != nil && ctx.Err() != nil && !othersAnswer && !notApplied(err) && !e.sick && !e.lastOK.After(sent) &&
		client == e.client && slices.Contains(p.eps, e) && !p.s.closed.Load()
	e.probing = again
	p.mu.Unlock()
	if again {
		return true
	}
	switch {
	case err == nil:
		p.answered(e, false)
	case p.s.closed.Load():
	case stale:
		p.redial(e)
	case notApplied(err) || othersAnswer:
		p.fell(e, err)
	}
	return false
}

// leaderChanged reports etcd's "leader changed": a linearizable read whose
// ReadIndex the old leader never answered; the member knows a new leader,
// and the read, which read nothing, may be sent again.
func leaderChanged(err error) bool {
	return err != nil && (errors.Is(err, rpctypes.ErrLeaderChanged) || errors.Is(err, rpctypes.ErrGRPCLeaderChanged) ||
		rpctypes.ErrorDesc(err) == rpctypes.ErrLeaderChanged.Error())
}

// definite reports whether err is etcd's answer to the request (a
// compacted revision, a value too large, ...): the endpoint works, and
// the request failed for good.
func definite(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() != codes.Unavailable && !notApplied(err)
	}
	return false
}

// notApplied reports whether err proves that the request was not applied,
// so that a write may be sent again elsewhere: the endpoint has no leader
// (checked before the request is processed), dropped the proposal, or
// was never reached.
func notApplied(err error) bool {
	switch {
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, errLearner), errors.Is(err, rpctypes.ErrTooManyRequests):
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		// gRPC fails a call that found no connection before sending it.
		for _, s := range []string{"Error while dialing", "connection refused", "no address available", "no connection available"} {
			if strings.Contains(msg, s) {
				return true
			}
		}
	case codes.Unknown:
		return strings.Contains(msg, "raft proposal dropped")
	}
	return false
}
