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
	"strings"
	"time"

	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// ErrPlainHTTP refuses a join over plain HTTP beyond loopback.
var ErrPlainHTTP = errors.New("joining over plain HTTP is allowed on loopback only: use the member's https:// URL")

// Join runs the joiner's half of the handshake (the member's is Membership.Admit,
// served by web) with the member serving the API at apiURL; the proof of
// req is filled in here. The
// member's certificate is not verified by a CA (the joiner has none yet):
// its proof of the token over this very TLS session is what authenticates
// it, and the answer is accepted only with a valid one. It returns the
// local address the connection used, a good default for the joiner's
// advertised address.
func Join(ctx context.Context, apiURL string, token []byte, req clusterapi.JoinRequest) (clusterapi.JoinResponse, net.Addr, error) {
	var out clusterapi.JoinResponse
	u, err := url.Parse(strings.TrimRight(apiURL, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return out, nil, fmt.Errorf("invalid --join URL %q: want https://host:port", apiURL)
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	addr := net.JoinHostPort(host, port)
	if u.Scheme == "http" && !isLoopback(host) {
		return out, nil, ErrPlainHTTP
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return out, nil, fmt.Errorf("join %s: %w", apiURL, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	local := conn.LocalAddr()
	var ekm []byte
	if u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{
			ServerName: host,
			MinVersion: tls.VersionTLS13, // keying material export is sound on 1.3
			// The member is authenticated by its proof below, bound to
			// this session's keying material, not by a certificate.
			InsecureSkipVerify: true, //nolint:gosec // see above
		})
		if err := tc.HandshakeContext(ctx); err != nil {
			return out, nil, fmt.Errorf("join %s: TLS: %w", apiURL, err)
		}
		st := tc.ConnectionState()
		if ekm, err = st.ExportKeyingMaterial(clusterapi.EKMLabel, nil, clusterapi.EKMLength); err != nil {
			return out, nil, fmt.Errorf("join %s: %w", apiURL, err)
		}
		conn = tc
	}
	req.Proof = clusterapi.Proof(token, clusterapi.JoinProofLabel, ekm)
	body, err := json.Marshal(req)
	if err != nil {
		return out, nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.Scheme+"://"+u.Host+clusterapi.JoinPath, bytes.NewReader(body))
	if err != nil {
		return out, nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Close = true
	if err := hreq.Write(conn); err != nil {
		return out, nil, fmt.Errorf("join %s: %w", apiURL, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), hreq)
	if err != nil {
		return out, nil, fmt.Errorf("join %s: %w", apiURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, nil, fmt.Errorf("join %s: %w", apiURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		var st struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		return out, nil, &RefusedError{URL: apiURL, Code: resp.StatusCode, Message: msg}
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, nil, fmt.Errorf("join %s: decode answer: %w", apiURL, err)
	}
	if !hmac.Equal([]byte(out.Proof), []byte(clusterapi.Proof(token, clusterapi.MemberProofLabel, ekm))) {
		return clusterapi.JoinResponse{}, nil, fmt.Errorf("join %s: the server did not prove it knows the cluster token; its answer is ignored", apiURL)
	}
	return out, local, nil
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
		select {
		case <-ctx.Done():
			return resp, fmt.Errorf("%w (gave up after %s)", err, joinTimeout)
		case <-time.After(time.Second):
		}
	}
}

// RefusedError is a member's non-200 answer to a join.
type RefusedError struct {
	URL     string
	Code    int
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("join %s: %s (%d)", e.URL, e.Message, e.Code)
}

// Retryable reports whether a join that failed with err may succeed
// later: the member was unreachable, or answered 5xx (etcd refuses a new
// member until the cluster has been healthy for a few seconds).
func Retryable(err error) bool {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Code >= 500
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
