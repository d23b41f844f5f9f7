package lease

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Drain is a drain record as the server's drain endpoints answer it
// (/leasehold/v1/namespaces/NS/drains/IDENTITY): the client reads the
// wire, not the server's types.
type Drain struct {
	Namespace string    `json:"namespace"`
	Identity  string    `json:"identity"`
	By        string    `json:"by"`
	Time      time.Time `json:"time"`
	Via       string    `json:"via,omitempty"`
	Forced    bool      `json:"forced,omitempty"`
}

// drainURL is the drain endpoint of ns/identity, fieldManager naming the
// client in the server's record.
func (c *Client) drainURL(ns, identity string, q url.Values) string {
	u := *c.base
	// RawPath keeps an identity's slashes escaped, Path is its decoded
	// twin (url.URL wants both to agree).
	base := strings.TrimRight(u.Path, "/")
	u.Path = base + "/leasehold/v1/namespaces/" + ns + "/drains/" + identity
	u.RawPath = strings.TrimRight(c.base.EscapedPath(), "/") + "/leasehold/v1/namespaces/" + url.PathEscape(ns) + "/drains/" + url.PathEscape(identity)
	if q == nil {
		q = url.Values{}
	}
	q.Set("fieldManager", "leasehold-drain")
	u.RawQuery = q.Encode()
	return u.String()
}

// DrainIdentity drains ns/identity (force: even when it is the only live
// candidate of a lease, which the server otherwise refuses with 409). It
// returns the record, created false when the identity was drained
// already (the first record is kept).
func (c *Client) DrainIdentity(ctx context.Context, ns, identity string, force bool) (d Drain, err error) {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	return d, c.do(ctx, http.MethodPut, c.drainURL(ns, identity, q), nil, &d)
}

// UndrainIdentity undrains ns/identity and returns the record it
// removed; a 404 (IsNotFound) when it was not drained.
func (c *Client) UndrainIdentity(ctx context.Context, ns, identity string) (d Drain, err error) {
	return d, c.do(ctx, http.MethodDelete, c.drainURL(ns, identity, nil), nil, &d)
}

// GetDrain reads the drain of ns/identity; a 404 (IsNotFound) when it is
// not drained, and from a server without drains.
func (c *Client) GetDrain(ctx context.Context, ns, identity string) (d Drain, err error) {
	return d, c.do(ctx, http.MethodGet, c.drainURL(ns, identity, nil), nil, &d)
}
