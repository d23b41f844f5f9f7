package web

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A server without authentication (the loopback default) is convenient
// for tools, and must stay out of reach of web pages the same user opens:
// a page on another origin can POST to it without a preflight (no
// Content-Type, text/plain, a form), and a page on a name the attacker's
// DNS rebinds to 127.0.0.1 is same-origin with it. Docker's, Jupyter's and
// Prometheus' own UIs defend the same way. browserGuard refuses, for
// unauthenticated requests:
//   - a Host header that names neither an IP address nor localhost nor one
//     of AllowedHosts (DNS rebinding);
//   - a state-changing request that a browser marks cross-site or
//     same-site (Sec-Fetch-Site), or whose Origin is not the server's;
//   - a state-changing request whose body has a Content-Type a browser may
//     send cross-origin without a preflight (text/plain,
//     application/x-www-form-urlencoded, multipart/form-data): the API
//     reads JSON (also without a Content-Type, as kube-apiserver), YAML,
//     protobuf and the patch types.
//
// Authenticated requests are not affected: a browser does not attach a
// bearer token by itself, and a device reached as pi.local with one keeps
// working.
func (s *Server) browserGuard(rc *fasthttp.RequestCtx, path string) error {
	if isHealthPath(path) {
		return nil // probes; no data behind them
	}
	if host := string(rc.Host()); !s.hostAllowed(host) {
		return guardForbidden("the Host header " + quoteHost(host) + " does not name this server: " +
			"use its address, localhost, or a name given to --allowed-hosts (an unknown name is how DNS rebinding reaches a local server)")
	}
	if !unsafeMethod(rc) {
		return nil
	}
	switch site := string(rc.Request.Header.Peek("Sec-Fetch-Site")); site {
	case "", "same-origin", "none":
	default:
		return guardForbidden("a " + site + " request from a web page may not change this server's state without credentials")
	}
	if origin := rc.Request.Header.Peek("Origin"); len(origin) > 0 {
		u, err := url.Parse(string(origin))
		if err != nil || !strings.EqualFold(u.Host, string(rc.Host())) {
			return guardForbidden("a request from the web page at " + quoteHost(string(origin)) + " may not change this server's state without credentials")
		}
	}
	ct := strings.ToLower(string(rc.Request.Header.ContentType()))
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	// An empty Content-Type is JSON, as kube-apiserver reads it: tools
	// rely on that, and a browser sending one cross-origin also sends an
	// Origin, refused above.
	if browserSimpleType(mt) {
		return s.api.UnsupportedMediaType(string(rc.Method()))
	}
	return nil
}

// unsafeMethod reports the methods that may change state.
func unsafeMethod(rc *fasthttp.RequestCtx) bool {
	return !rc.IsGet() && !rc.IsHead() && !rc.IsOptions()
}

// browserSimpleType reports the body types a page may send to any origin
// without a CORS preflight.
func browserSimpleType(mt string) bool {
	return mt == "text/plain" || mt == "application/x-www-form-urlencoded" || mt == "multipart/form-data"
}

// hostAllowed reports whether a Host header names this server: empty (an
// HTTP/1.0 client), an IP address (no DNS involved), a single-label name
// ("localhost", a machine's own short name: resolved locally, never
// through a domain an attacker owns), a subdomain of localhost (browsers
// resolve them to loopback themselves), or a name of AllowedHosts
// (".example.com" allows its subdomains).
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if net.ParseIP(name) != nil || !strings.Contains(name, ".") || strings.HasSuffix(name, ".localhost") {
		return true
	}
	for _, a := range s.allowedHosts {
		if a == name || strings.HasPrefix(a, ".") && strings.HasSuffix(name, a) {
			return true
		}
	}
	return false
}

func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "..."
	}
	return "\"" + strings.ToValidUTF8(h, "?") + "\""
}

// guardForbidden is the 403 Status of a refused browser request.
func guardForbidden(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: "forbidden: " + msg,
	}}
}

// normalizeAllowedHosts lowercases the --allowed-hosts names and drops
// ports and trailing dots.
func normalizeAllowedHosts(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}
