package lease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
)

// ReadyzURLs are the /readyz URLs of a server listening on listen
// (host:port), HTTPS first, then plain HTTP; an unspecified or empty host
// is reached through 127.0.0.1.
func ReadyzURLs(listen string) ([]string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	hp := net.JoinHostPort(host, port)
	return []string{"https://" + hp + "/readyz", "http://" + hp + "/readyz"}, nil
}

// ProbeReady GETs the readiness URLs in turn and returns nil once one
// answers 200. A URL whose scheme the server does not speak (HTTPS to a
// plain-HTTP server, or the reverse) moves on to the next; any other
// failure, or a status other than 200, is the error. The server is
// verified with caFile when it exists; a loopback server is otherwise not
// verified, as the check asks only whether the local process is ready.
func ProbeReady(ctx context.Context, urls []string, caFile string) error {
	var err error
	for _, u := range urls {
		var body string
		var code int
		code, body, err = probe(ctx, u, caFile)
		var rh tls.RecordHeaderError
		if errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &rh) {
			continue // a plain-HTTP server: try the next URL
		}
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%s answered %d: %s", u, code, strings.TrimSpace(body))
		}
		break
	}
	return err
}

// probe GETs u once.
func probe(ctx context.Context, u, caFile string) (int, string, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if pem, err := os.ReadFile(caFile); caFile != "" && err == nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tc.RootCAs = pool
	} else if isLoopbackURL(u) {
		tc.InsecureSkipVerify = true //nolint:gosec // loopback readiness probe of our own process
	}
	tr := &http.Transport{TLSClientConfig: tc, Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// isLoopbackURL reports whether u's host names only this machine
// (localhost or a loopback IP).
func isLoopbackURL(u string) bool {
	rest := u[strings.Index(u, "://")+3:]
	hp, _, _ := strings.Cut(rest, "/")
	host, _, err := net.SplitHostPort(hp)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
