package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// ErrPlainHTTP refuses a join over plain HTTP beyond loopback.
var ErrPlainHTTP = errors.New("joining over plain HTTP is allowed on loopback only: use the member's https:// URL")

// Join runs the joiner's half of the handshake (the member's is served by
// web, which checks the proofs, and Membership.Admit) with the member
// serving the API at apiURL, on one connection: it asks for a nonce, then
// posts req (whose CSR the caller made) with that nonce and its proof
// filled in here. The member's certificate is not verified by a CA (the
// joiner has none yet): its proof of the token over this very TLS session,
// request and answer is what authenticates it, and the answer is accepted
// only with a valid one. It returns the local address the connection used,
// a good default for the joiner's advertised address.
func Join(ctx context.Context, apiURL string, token []byte, req clusterapi.JoinRequest) (clusterapi.JoinResponse, net.Addr, error) {
	var out clusterapi.JoinResponse
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ex, err := dialExchange(ctx, "join", apiURL)
	if err != nil {
		return out, nil, err
	}
	defer ex.conn.Close()
	var challenge clusterapi.NonceResponse
	if err := ex.post(clusterapi.JoinNoncePath, nil, false, &challenge); err != nil {
		var re *RefusedError
		if errors.As(err, &re) && re.Code == http.StatusNotFound {
			re.Message = "the member has no " + clusterapi.JoinNoncePath + ": it runs a leasehold older than the challenge-response join; upgrade it first (or join through an upgraded member)"
		}
		return out, nil, err
	}
	req.Nonce = challenge.Nonce
	req.Proof = clusterapi.JoinProof(token, ex.ekm, &req)
	body, err := json.Marshal(req)
	if err != nil {
		return out, nil, err
	}
	if err := ex.post(clusterapi.JoinPath, body, true, &out); err != nil {
		return out, nil, err
	}
	if !hmac.Equal([]byte(out.Proof), []byte(clusterapi.MemberProof(token, ex.ekm, &req, &out))) {
		return clusterapi.JoinResponse{}, nil, fmt.Errorf("join %s: the server did not prove it knows the cluster token; its answer is ignored", apiURL)
	}
	return out, ex.local, nil
}

// dialExchange opens the one connection of a handshake (op: "join" or
// "renew") with the member serving the API at apiURL, and exports the TLS
// session's keying material the proofs cover (none over plain HTTP, which
// is allowed on loopback only). The member's certificate is not verified
// by a CA: the proofs over this session authenticate the two ends.
func dialExchange(ctx context.Context, op, apiURL string) (*exchange, error) {
	u, err := url.Parse(strings.TrimRight(apiURL, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("invalid --join URL %q: want https://host:port", apiURL)
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	addr := net.JoinHostPort(host, port)
	if u.Scheme == "http" && !isLoopback(host) {
		return nil, ErrPlainHTTP
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, apiURL, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	ex := &exchange{ctx: ctx, op: op, local: conn.LocalAddr(), base: u.Scheme + "://" + u.Host, apiURL: apiURL}
	if u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{
			ServerName: host,
			MinVersion: tls.VersionTLS13, // keying material export is sound on 1.3
			// The member is authenticated by its proof (a join) or by
			// the CA the device holds checking its answer (a renewal),
			// not by the API's certificate.
			InsecureSkipVerify: true, //nolint:gosec // see above
		})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%s %s: TLS: %w", op, apiURL, err)
		}
		st := tc.ConnectionState()
		if ex.ekm, err = st.ExportKeyingMaterial(clusterapi.EKMLabel, nil, clusterapi.EKMLength); err != nil {
			tc.Close()
			return nil, fmt.Errorf("%s %s: %w", op, apiURL, err)
		}
		conn = tc
	}
	ex.conn, ex.r = conn, bufio.NewReader(conn)
	return ex, nil
}

// exchange is a handshake's requests on its one connection.
type exchange struct {
	ctx          context.Context
	op           string // "join" or "renew", for messages
	conn         net.Conn
	r            *bufio.Reader
	local        net.Addr
	ekm          []byte
	base, apiURL string
}

// post sends body (JSON) to path and decodes a 200 answer into out; any
// other answer is a RefusedError.
func (e *exchange) post(path string, body []byte, last bool, out any) error {
	hreq, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Close = last
	if err := hreq.Write(e.conn); err != nil {
		return fmt.Errorf("%s %s: %w", e.op, e.apiURL, err)
	}
	resp, err := http.ReadResponse(e.r, hreq)
	if err != nil {
		return fmt.Errorf("%s %s: %w", e.op, e.apiURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", e.op, e.apiURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		var st struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		refused := &RefusedError{Op: e.op, URL: e.apiURL, Code: resp.StatusCode, Message: msg}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			refused.RetryAfter = time.Duration(s) * time.Second
		}
		return refused
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", e.op, e.apiURL, err)
	}
	return nil
}

// joinTimeout bounds how long a joiner retries a member that is down or
// not ready to admit it.
const joinTimeout = 2 * time.Minute

// JoinWithRetry runs the handshake until it succeeds, fails for good
// (wrong token, name in use), or joinTimeout passes.
func JoinWithRetry(ctx context.Context, apiURL string, token []byte, req clusterapi.JoinRequest, log *slog.Logger) (clusterapi.JoinResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		resp, _, err := Join(ctx, apiURL, token, req)
		if err == nil || !Retryable(err) {
			return resp, err
		}
		if attempt%5 == 0 {
			log.Info("Joining the cluster; retrying", "via", apiURL, "err", err)
		}
		wait := time.Second
		var re *RefusedError
		if errors.As(err, &re) && re.RetryAfter > wait {
			wait = re.RetryAfter // the member's rate limit says when
		}
		select {
		case <-ctx.Done():
			return resp, fmt.Errorf("%w (gave up after %s)", err, joinTimeout)
		case <-time.After(wait):
		}
	}
}

// RefusedError is a member's non-200 answer to a join (or a renewal).
type RefusedError struct {
	Op      string // "join" when empty, or "renew"
	URL     string
	Code    int
	Message string
	// RetryAfter is the answer's Retry-After (a 429 of the join's rate
	// limits), 0 without one.
	RetryAfter time.Duration
}

func (e *RefusedError) Error() string {
	op := e.Op
	if op == "" {
		op = "join"
	}
	return fmt.Sprintf("%s %s: %s (%d)", op, e.URL, e.Message, e.Code)
}

// Retryable reports whether a join that failed with err may succeed
// later: the member was unreachable, answered 5xx (etcd refuses a new
// member until the cluster has been healthy for a few seconds), or 429
// (the join's rate limits).
func Retryable(err error) bool {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Code >= 500 || re.Code == http.StatusTooManyRequests
	}
	return !errors.Is(err, ErrPlainHTTP) && !strings.Contains(err.Error(), "did not prove")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// joinWithKey generates the joiner's key, sends its certificate request
// in req (for req.Name and req.Hosts) and checks that the certificate it
// gets back is for that key and name, signed by the CA it gets: the key
// never leaves this process but to the data directory.
func joinWithKey(ctx context.Context, apiURL string, token []byte, req clusterapi.JoinRequest, log *slog.Logger) (clusterapi.JoinResponse, []byte, error) {
	key, keyPEM, err := pki.GenerateKey()
	if err != nil {
		return clusterapi.JoinResponse{}, nil, err
	}
	csr, err := pki.CreateCSR(key, req.Name, req.Hosts)
	if err != nil {
		return clusterapi.JoinResponse{}, nil, err
	}
	req.CSR = string(csr)
	resp, err := JoinWithRetry(ctx, apiURL, token, req, log)
	if err != nil {
		return resp, nil, err
	}
	if err := pki.CheckIssued([]byte(resp.Cert), []byte(resp.CACert), key, req.Name); err != nil {
		return clusterapi.JoinResponse{}, nil, fmt.Errorf("join %s: the member's certificate: %w", apiURL, err)
	}
	return resp, keyPEM, nil
}
