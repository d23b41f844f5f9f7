package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// runHealthcheck implements "leasehold healthcheck": GET /readyz on the
// local server and exit 0 when it answers 200, 1 otherwise. Distroless
// images have no curl, so the Docker HEALTHCHECK runs this. Without --url
// the address comes from --listen (LEASEHOLD_LISTEN, as serve reads it);
// HTTPS is tried first, then plain HTTP.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, dir := dataDirFlags("healthcheck", stderr)
	listen := "127.0.0.1:8080"
	if v, ok := os.LookupEnv(envName("listen")); ok {
		listen = v
	}
	fs.StringVar(&listen, "listen", listen, "the server's `address` (env "+envName("listen")+")")
	url := fs.String("url", "", "full `URL` to probe instead, e.g. https://127.0.0.1:8443/readyz")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	urls := []string{*url}
	if *url == "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold healthcheck: invalid --listen %q: %v\n", listen, err)
			return 2
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
		}
		hp := net.JoinHostPort(host, port)
		urls = []string{"https://" + hp + "/readyz", "http://" + hp + "/readyz"}
	}
	var err error
	for _, u := range urls {
		var body string
		var code int
		code, body, err = probe(ctx, u, *dir)
		var rh tls.RecordHeaderError
		if errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &rh) {
			continue // a plain-HTTP server: try the next URL
		}
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%s answered %d: %s", u, code, strings.TrimSpace(body))
		}
		if err == nil {
			fmt.Fprintln(stdout, "ok")
			return 0
		}
		break
	}
	fmt.Fprintf(stderr, "leasehold healthcheck: %v\n", err)
	return 1
}

// probe GETs u. The server is verified with <data-dir>/pki/ca.crt when it
// exists; a loopback server is otherwise not verified, as the check asks
// only whether the local process is ready.
func probe(ctx context.Context, u, dataDir string) (int, string, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if pem, err := os.ReadFile(filepath.Join(dataDir, "pki", "ca.crt")); err == nil {
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

func isLoopbackURL(u string) bool {
	rest := u[strings.Index(u, "://")+3:]
	hp, _, _ := strings.Cut(rest, "/")
	host, _, err := net.SplitHostPort(hp)
	return err == nil && isLoopbackHost(host)
}
