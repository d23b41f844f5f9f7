package clusterapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Nonces are the challenges a member has handed out and not yet seen used:
// each is accepted once, within its time to live, so a join body captured
// on the wire (or replayed on loopback, where there is no TLS session to
// bind to) is refused.
type Nonces struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	pending map[string]time.Time // nonce -> expiry
}

// ErrTooManyNonces is Issue's answer when max nonces are pending: joiners
// retry (the join endpoint's rate limits keep honest ones far below it).
var ErrTooManyNonces = errors.New("too many join challenges pending")

// NewNonces remembers at most max pending nonces, each for ttl; now is the
// clock (time.Now when nil).
func NewNonces(ttl time.Duration, max int, now func() time.Time) *Nonces {
	if now == nil {
		now = time.Now
	}
	return &Nonces{ttl: ttl, max: max, now: now, pending: map[string]time.Time{}}
}

// TTL is how long an issued nonce stays valid.
func (n *Nonces) TTL() time.Duration { return n.ttl }

// Issue hands out a fresh nonce.
func (n *Nonces) Issue() (string, error) {
	var b [NonceBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	nonce := hex.EncodeToString(b[:])
	now := n.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) >= n.max {
		for k, exp := range n.pending {
			if !now.Before(exp) {
				delete(n.pending, k)
			}
		}
		if len(n.pending) >= n.max {
			return "", ErrTooManyNonces
		}
	}
	n.pending[nonce] = now.Add(n.ttl)
	return nonce, nil
}

// Consume reports whether nonce was issued, has not expired and was not
// used before; either way it cannot be used again.
func (n *Nonces) Consume(nonce string) bool {
	now := n.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	exp, ok := n.pending[nonce]
	delete(n.pending, nonce)
	return ok && now.Before(exp)
}

// Pending is how many nonces are remembered.
func (n *Nonces) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending)
}
