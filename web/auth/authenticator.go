package auth

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// Authenticator combines the configured authenticators in kube-apiserver's
// order: client certificate first, then bearer token.
type Authenticator struct {
	// Tokens authenticates bearer tokens; nil disables them.
	Tokens *Tokens
	// ClientCAs verifies client certificates; nil disables them.
	ClientCAs *x509.CertPool
}

// ErrUnauthorized is returned for requests that must be answered with 401:
// no credentials while authentication is required, or credentials that do
// not authenticate.
var ErrUnauthorized = errors.New("unauthorized")

// Enabled reports whether any authenticator is configured. Without one
// every request is anonymous and allowed.
func (a *Authenticator) Enabled() bool {
	return a != nil && (a.Tokens != nil || a.ClientCAs != nil)
}

// Authenticate identifies a request from its Authorization header and TLS
// state (nil for plain HTTP). Without any authenticator it returns
// Anonymous. With one, anonymous requests are refused (kube-apiserver's
// --anonymous-auth=false), so the result is a user or ErrUnauthorized.
// A certificate that authenticates wins over any token, as upstream's
// union stops at the first success.
func (a *Authenticator) Authenticate(authorization []byte, state *tls.ConnectionState) (User, error) {
	if !a.Enabled() {
		return Anonymous, nil
	}
	if a.ClientCAs != nil && state != nil && len(state.PeerCertificates) > 0 {
		u, err := verifyClientCert(a.ClientCAs, state.PeerCertificates)
		if err == nil {
			return withAuthenticated(u), nil
		}
	}
	if a.Tokens != nil {
		if tok, ok := bearerToken(authorization); ok {
			if u, ok := a.Tokens.Authenticate(tok); ok {
				return withAuthenticated(u), nil
			}
		}
	}
	// Bad or missing credentials alike: anonymous access is off.
	return User{}, ErrUnauthorized
}

// bearerToken parses "Bearer <token>" as k8s.io/apiserver's bearertoken
// authenticator: the scheme is case-insensitive and an empty token counts
// as none.
func bearerToken(h []byte) (string, bool) {
	h = bytes.TrimSpace(h)
	scheme, rest, ok := bytes.Cut(h, []byte(" "))
	if !ok || !bytes.EqualFold(scheme, []byte("bearer")) {
		return "", false
	}
	tok, _, _ := bytes.Cut(rest, []byte(" "))
	if len(tok) == 0 {
		return "", false
	}
	return string(tok), true
}
