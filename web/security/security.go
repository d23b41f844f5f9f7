// Package security assembles serve's TLS, authentication and authorization
// settings from its flags, named after kube-apiserver's where one
// exists: RegisterFlags adds them to a flag set, Config.Validate applies the
// start-up rules (off loopback, plain HTTP and unauthenticated serving are
// refused unless explicitly accepted), and Config.Build reads the
// certificate, token, CA and policy files and generates the --tls-auto
// certificates into <data-dir>/pki/.
//
// The result, a *Security, is what main hands to the web server (TLS
// configuration, authenticator, ABAC policies) and to the kubeconfig it
// writes for local clients (scheme, generated CA, token).
package security

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/web/auth"
	"github.com/leasehold/leasehold/web/kubeconfig"
)

// Config holds serve's TLS, authentication and authorization flags. The
// limits are web.Limits, logging, metrics and profiling
// web.Observability.
type Config struct {
	TLSCertFile, TLSKeyFile string
	TLSAuto                 OptionalBool
	TLSSANs                 string
	ClientCAFile            string
	TokenAuthFile           string
	PolicyFile              string
	KubeconfigUser          string
	// The loudly named escape hatches for trusted networks.
	AllowUnauthenticatedNetwork bool
	AllowHTTPNetwork            bool
	// allowedHosts is --allowed-hosts as given (AllowedHosts).
	allowedHosts string
}

// RegisterFlags adds the security flags to fs and returns the Config they
// fill when fs is parsed.
func RegisterFlags(fs *flag.FlagSet) *Config {
	c := new(Config)
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM `file` with the serving certificate (and intermediates); with --tls-private-key-file")
	fs.StringVar(&c.TLSKeyFile, "tls-private-key-file", "", "PEM `file` with the serving certificate's private key")
	fs.Var(&c.TLSAuto, "tls-auto", "serve HTTPS with a CA and certificate generated into <data-dir>/pki/ on first start (default: on when --listen is not a loopback address and no --tls-cert-file is given)")
	fs.StringVar(&c.TLSSANs, "tls-san", "", "extra comma-separated DNS `names` or IPs for the --tls-auto certificate")
	fs.StringVar(&c.ClientCAFile, "client-ca-file", "", "PEM `file` of CAs whose client certificates authenticate (user from CN, groups from O)")
	fs.StringVar(&c.TokenAuthFile, "token-auth-file", "", "CSV `file` of bearer tokens in kube-apiserver's format: token,user,uid,\"group1,group2\"")
	fs.StringVar(&c.PolicyFile, "authorization-policy-file", "", "ABAC policy `file` in kube-apiserver's format (one JSON Policy per line); without it every authenticated user may do everything")
	fs.StringVar(&c.KubeconfigUser, "write-kubeconfig-user", "", "token-file `user` whose token goes into the written kubeconfig (default: the file's first entry)")
	fs.BoolVar(&c.AllowUnauthenticatedNetwork, "insecure-allow-unauthenticated-network", false, "DANGEROUS: serve on a non-loopback address without any authenticator, so anyone who can connect may change every lease")
	fs.BoolVar(&c.AllowHTTPNetwork, "insecure-allow-http-network", false, "DANGEROUS: serve plain HTTP on a non-loopback address (with --tls-auto=false and no certificate), so tokens and leases cross the network in clear text")
	fs.StringVar(&c.allowedHosts, "allowed-hosts", "", "comma-separated host `names` a request without credentials may address this server by, besides IP addresses, localhost and the --listen host (\".example.com\" allows its subdomains); other names are refused, so that a web page cannot reach the server through DNS rebinding")
	return c
}

// AllowedHosts are the further names an unauthenticated request's Host
// header may give (web.Options.AllowedHosts): --allowed-hosts and the
// host of listen.
func (c *Config) AllowedHosts(listen string) []string {
	var hosts []string
	for _, h := range strings.Split(c.allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return hosts
}

// OptionalBool is a bool flag that remembers whether it was given (on the
// command line or in the environment), for defaults that depend on other
// flags.
type OptionalBool struct{ v, set bool }

func (b *OptionalBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.v)
}

// Set implements flag.Value.
func (b *OptionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.v, b.set = v, true
	return nil
}

// IsBoolFlag lets the flag be given without a value.
func (b *OptionalBool) IsBoolFlag() bool { return true }

// IsLoopbackHost reports whether host names only this machine.
// Hostnames other than localhost count as non-loopback: they may resolve
// to anything.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TLSEnabled reports whether serve will speak HTTPS when listening on
// listenHost.
func (c *Config) TLSEnabled(listenHost string) bool {
	if c.TLSCertFile != "" {
		return true
	}
	if c.TLSAuto.set {
		return c.TLSAuto.v
	}
	return !IsLoopbackHost(listenHost)
}

func (c *Config) authenticates() bool {
	return c.TokenAuthFile != "" || c.ClientCAFile != ""
}

// Validate applies the start-up rules for serving on listen: off
// loopback, plain HTTP and unauthenticated serving are refused unless
// explicitly accepted.
func (c *Config) Validate(listen string) error {
	host, _, _ := net.SplitHostPort(listen)
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if c.TLSCertFile != "" && c.TLSAuto.set && c.TLSAuto.v {
		return errors.New("--tls-auto and --tls-cert-file exclude each other")
	}
	tlsOn := c.TLSEnabled(host)
	if c.ClientCAFile != "" && !tlsOn {
		return errors.New("--client-ca-file needs TLS (--tls-cert-file or --tls-auto)")
	}
	if c.PolicyFile != "" && !c.authenticates() {
		return errors.New("--authorization-policy-file needs an authenticator (--token-auth-file or --client-ca-file): without one every request is anonymous")
	}
	if c.KubeconfigUser != "" && c.TokenAuthFile == "" {
		return errors.New("--write-kubeconfig-user needs --token-auth-file")
	}
	if IsLoopbackHost(host) {
		return nil
	}
	if !tlsOn && !c.AllowHTTPNetwork {
		return fmt.Errorf("refusing to serve plain HTTP on %s, which is not a loopback address: tokens and leases would cross the network in clear text. "+
			"Drop --tls-auto=false (a certificate is then generated), give --tls-cert-file and --tls-private-key-file, "+
			"or pass --insecure-allow-http-network to accept the risk", listen)
	}
	if !c.authenticates() && !c.AllowUnauthenticatedNetwork {
		return fmt.Errorf("refusing to serve on %s, which is not a loopback address, without authentication: anyone who can connect could take or delete any lease. "+
			"Give --token-auth-file (kube-apiserver's token,user,uid,\"groups\" CSV) or --client-ca-file, "+
			"or pass --insecure-allow-unauthenticated-network to accept the risk", listen)
	}
	return nil
}

// Security is the loaded configuration serve hands to the web server and
// the kubeconfig writer.
type Security struct {
	TLS      *tls.Config
	Auth     *auth.Authenticator
	Policies auth.Policies
	// CAPEM verifies the server (generated CA), for the kubeconfig.
	CAPEM []byte
	// Token and TokenUser are embedded in the written kubeconfig.
	Token, TokenUser string
}

// Build reads the certificate, token, CA and policy files, and generates
// the --tls-auto certificates into pkiDir (<data-dir>/pki/).
func (c *Config) Build(listen, pkiDir string, log *slog.Logger) (*Security, error) {
	host, _, _ := net.SplitHostPort(listen)
	sec := &Security{Auth: &auth.Authenticator{}}
	if c.TokenAuthFile != "" {
		tokens, entries, err := auth.LoadTokenFile(c.TokenAuthFile)
		if err != nil {
			return nil, err
		}
		if tokens.Len() == 0 {
			return nil, fmt.Errorf("token auth file %s holds no token", c.TokenAuthFile)
		}
		sec.Auth.Tokens = tokens
		i := 0
		if c.KubeconfigUser != "" {
			i = -1
			for j, e := range entries {
				if e.User.Name == c.KubeconfigUser {
					i = j
					break
				}
			}
			if i < 0 {
				return nil, fmt.Errorf("--write-kubeconfig-user %q is not in %s", c.KubeconfigUser, c.TokenAuthFile)
			}
		}
		sec.Token, sec.TokenUser = entries[i].Token, entries[i].User.Name
	}
	if c.ClientCAFile != "" {
		pool, err := auth.LoadCertPool(c.ClientCAFile)
		if err != nil {
			return nil, err
		}
		sec.Auth.ClientCAs = pool
	}
	if c.PolicyFile != "" {
		p, err := auth.LoadPolicyFile(c.PolicyFile)
		if err != nil {
			return nil, err
		}
		sec.Policies = p
	}
	if !c.TLSEnabled(host) {
		return sec, nil
	}
	certFile, keyFile := c.TLSCertFile, c.TLSKeyFile
	if certFile == "" {
		files, err := pki.Ensure(pkiDir, servingHosts(host, splitList(c.TLSSANs)))
		if err != nil {
			return nil, err
		}
		if len(files.Generated) > 0 {
			log.Info("Generated TLS certificates", "dir", filepath.Dir(files.CAFile), "generated", files.Generated)
		}
		certFile, keyFile, sec.CAPEM = files.CertFile, files.KeyFile, files.CAPEM
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate: %w", err)
	}
	sec.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		// fasthttp speaks HTTP/1.1 only; clients fall back from h2.
		NextProtos: []string{"http/1.1"},
	}
	if sec.Auth.ClientCAs != nil {
		// Verified by the authenticator, so that a bad certificate gets
		// kube-apiserver's 401 rather than a failed handshake.
		sec.TLS.ClientAuth = tls.RequestClientCert
		sec.TLS.ClientCAs = sec.Auth.ClientCAs
	}
	return sec, nil
}

// servingHosts are the SANs of the generated certificate: the listen
// host, this machine's names and loopback addresses, extra --tls-san
// entries, and every interface address when listening on all of them.
func servingHosts(listenHost string, extra []string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	ip := net.ParseIP(listenHost)
	switch {
	case listenHost == "" || (ip != nil && ip.IsUnspecified()):
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
					hosts = append(hosts, n.IP.String())
				}
			}
		}
	default:
		hosts = append(hosts, listenHost)
	}
	return append(hosts, extra...)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// ServerURL is the URL local clients reach addr at: an unspecified
// listen address (0.0.0.0, ::) is reached through loopback.
func ServerURL(scheme, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// Scheme is "https" when the server speaks TLS, else "http".
func (s *Security) Scheme() string {
	if s.TLS != nil {
		return "https"
	}
	return "http"
}

// Kubeconfig renders the kubeconfig serve writes for local clients: the
// generated CA and the chosen token-file user's token, when there are.
func (s *Security) Kubeconfig(server string) ([]byte, error) {
	return kubeconfig.Render(kubeconfig.Spec{Server: server, CAPEM: s.CAPEM, Token: s.Token}, "yaml")
}

// WriteKubeconfig writes the kubeconfig for server to path (mode 0600)
// and says so, with the hint that points clients at it.
func (s *Security) WriteKubeconfig(path, server string, log *slog.Logger) error {
	content, err := s.Kubeconfig(server)
	if err == nil {
		err = kubeconfig.Write(path, content)
	}
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	log.Info("Wrote kubeconfig", "path", abs, "mode", "0600", "user", s.TokenUser, "hint", "export KUBECONFIG="+abs)
	return nil
}
