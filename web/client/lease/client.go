package lease

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config says where the API server is and how to authenticate.
type Config struct {
	Server        string // https://host:port or http://host:port
	BearerToken   string
	CAData        []byte // PEM; empty means the system roots
	CertData      []byte // PEM client certificate
	KeyData       []byte // PEM client key
	Insecure      bool   // skip TLS verification
	TLSServerName string
	Namespace     string // the context's namespace, if any (informational)
	UserAgent     string
	// Timeout bounds each non-watch request (0: none; callers should
	// bound with a context instead).
	Timeout time.Duration
}

// Client talks to one API server. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	hc    *http.Client
	watch *http.Client // no overall timeout: watches are long-lived
	token string
	ua    string
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.Server, "/"))
	if err != nil {
		return nil, fmt.Errorf("invalid server URL %q: %w", cfg.Server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("invalid server URL %q: want http(s)://host[:port]", cfg.Server)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a lease server is local infrastructure; proxies add failure modes
	if u.Scheme == "https" {
		tc := &tls.Config{InsecureSkipVerify: cfg.Insecure, ServerName: cfg.TLSServerName, MinVersion: tls.VersionTLS12} //nolint:gosec // the user asked for it in the kubeconfig
		if len(cfg.CAData) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(cfg.CAData) {
				return nil, errors.New("certificate authority data holds no PEM certificate")
			}
			tc.RootCAs = pool
		}
		if len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 {
			cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
			if err != nil {
				return nil, fmt.Errorf("client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		tr.TLSClientConfig = tc
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "leasehold-client"
	}
	return &Client{
		base:  u,
		hc:    &http.Client{Transport: tr, Timeout: cfg.Timeout},
		watch: &http.Client{Transport: tr},
		token: cfg.BearerToken,
		ua:    ua,
	}, nil
}

// Server is the base URL requests go to.
func (c *Client) Server() string { return c.base.String() }

// StatusError is a non-2xx answer from the server.
type StatusError struct {
	Code   int
	Status metav1.Status
}

func (e *StatusError) Error() string {
	if e.Status.Message != "" {
		return e.Status.Message
	}
	return fmt.Sprintf("the server responded with status %d", e.Code)
}

func statusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// IsNotFound reports a 404 answer.
func IsNotFound(err error) bool { return statusCode(err) == http.StatusNotFound }

// IsConflict reports a 409 Conflict (a stale resourceVersion), not an
// AlreadyExists, which is also a 409.
func IsConflict(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusConflict && se.Status.Reason != metav1.StatusReasonAlreadyExists
}

// IsAlreadyExists reports a create that lost to an existing object.
func IsAlreadyExists(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusConflict && se.Status.Reason == metav1.StatusReasonAlreadyExists
}

// IsGone reports 410 Expired/Gone (a watch resourceVersion too old).
func IsGone(err error) bool { return statusCode(err) == http.StatusGone }

// resource names one namespaced collection.
type resource struct {
	groupVersion string // coordination.k8s.io/v1
	plural       string
}

var (
	leases     = resource{"coordination.k8s.io/v1", "leases"}
	candidates = resource{"coordination.k8s.io/v1beta1", "leasecandidates"}
)

func (c *Client) url(r resource, ns, name string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + "/apis/" + r.groupVersion + "/namespaces/" + url.PathEscape(ns) + "/" + r.plural
	if name != "" {
		u.Path += "/" + url.PathEscape(name)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *Client) newRequest(ctx context.Context, method, u string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends one request and decodes a 2xx JSON answer into out.
func (c *Client) do(ctx context.Context, method, u string, body, out any) error {
	req, err := c.newRequest(ctx, method, u, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err // already names method and URL
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, u, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeStatus(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, u, err)
	}
	return nil
}

func decodeStatus(code int, data []byte) error {
	se := &StatusError{Code: code}
	if json.Unmarshal(data, &se.Status) != nil || se.Status.Kind != "Status" {
		se.Status = metav1.Status{Message: fmt.Sprintf("the server responded with status %d: %s", code, strings.TrimSpace(string(data)))}
	}
	return se
}

// GetLease reads one Lease.
func (c *Client) GetLease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	l := new(coordinationv1.Lease)
	return l, c.do(ctx, http.MethodGet, c.url(leases, ns, name, nil), nil, l)
}

// CreateLease creates l in its namespace.
func (c *Client) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l = withKind(l, "Lease", leases)
	out := new(coordinationv1.Lease)
	return out, c.do(ctx, http.MethodPost, c.url(leases, l.Namespace, "", nil), l, out)
}

// UpdateLease replaces l; its resourceVersion makes the update conditional.
func (c *Client) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l = withKind(l, "Lease", leases)
	out := new(coordinationv1.Lease)
	return out, c.do(ctx, http.MethodPut, c.url(leases, l.Namespace, l.Name, nil), l, out)
}

// GetCandidate reads one LeaseCandidate.
func (c *Client) GetCandidate(ctx context.Context, ns, name string) (*coordinationv1beta1.LeaseCandidate, error) {
	lc := new(coordinationv1beta1.LeaseCandidate)
	return lc, c.do(ctx, http.MethodGet, c.url(candidates, ns, name, nil), nil, lc)
}

// CreateCandidate creates lc in its namespace.
func (c *Client) CreateCandidate(ctx context.Context, lc *coordinationv1beta1.LeaseCandidate) (*coordinationv1beta1.LeaseCandidate, error) {
	lc = withKind(lc, "LeaseCandidate", candidates)
	out := new(coordinationv1beta1.LeaseCandidate)
	return out, c.do(ctx, http.MethodPost, c.url(candidates, lc.Namespace, "", nil), lc, out)
}

// UpdateCandidate replaces lc (conditional on its resourceVersion).
func (c *Client) UpdateCandidate(ctx context.Context, lc *coordinationv1beta1.LeaseCandidate) (*coordinationv1beta1.LeaseCandidate, error) {
	lc = withKind(lc, "LeaseCandidate", candidates)
	out := new(coordinationv1beta1.LeaseCandidate)
	return out, c.do(ctx, http.MethodPut, c.url(candidates, lc.Namespace, lc.Name, nil), lc, out)
}

// DeleteCandidate deletes one LeaseCandidate.
func (c *Client) DeleteCandidate(ctx context.Context, ns, name string) error {
	var st metav1.Status
	return c.do(ctx, http.MethodDelete, c.url(candidates, ns, name, nil), nil, &st)
}

// withKind returns a shallow copy of o with apiVersion and kind set: the
// server accepts bodies without them, but requests then read clearly in
// audit logs and decode unambiguously.
func withKind[T *coordinationv1.Lease | *coordinationv1beta1.LeaseCandidate](o T, kind string, r resource) T {
	switch v := any(o).(type) {
	case *coordinationv1.Lease:
		cp := *v
		cp.APIVersion, cp.Kind = r.groupVersion, kind
		return any(&cp).(T)
	case *coordinationv1beta1.LeaseCandidate:
		cp := *v
		cp.APIVersion, cp.Kind = r.groupVersion, kind
		return any(&cp).(T)
	}
	return o
}
