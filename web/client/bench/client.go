package bench

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"
)

// userAgent makes the server's default field manager "leasehold-bench",
// as client-go's does for a binary of that name.
const userAgent = "leasehold-bench/v0 (linux) loadgen"

// newClient is the pooled HTTP/1.1 client of every non-watch request.
func newClient(cfg *Config, conns int) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                          cfg.host(),
		Name:                          userAgent,
		MaxConns:                      conns,
		MaxConnWaitTimeout:            30 * time.Second,
		ReadTimeout:                   30 * time.Second,
		WriteTimeout:                  30 * time.Second,
		MaxIdemponentCallAttempts:     1,
		DisableHeaderNamesNormalizing: true,
		NoDefaultUserAgentHeader:      false,
		ReadBufferSize:                16 << 10,
		IsTLS:                         cfg.tls(),
		TLSConfig:                     &tls.Config{InsecureSkipVerify: cfg.InsecureSkipTLSVerify}, //nolint:gosec // opt-in, for a loopback peer
	}
}

// do sends one request and returns the status code; the body stays in
// resp.
func do(hc *fasthttp.HostClient, cfg *Config, method, path string, body []byte, req *fasthttp.Request, resp *fasthttp.Response) (int, error) {
	req.Reset()
	resp.Reset()
	req.Header.SetMethod(method)
	if cfg.tls() {
		req.SetRequestURI("https://" + cfg.host() + path) // the client refuses a path-only https request
	} else {
		req.SetRequestURI(path)
	}
	req.Header.SetHost(cfg.host())
	req.Header.Set("Accept", "application/json")
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if err := hc.Do(req, resp); err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode(), nil
}
