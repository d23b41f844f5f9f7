package web_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web"
)

// quietTimeout is the read and idle timeout of the servers below: short,
// since every case waits it out.
const quietTimeout = 300 * time.Millisecond

// TestQuietConnectionsCloseWithoutAnswer: a connection on which no byte of
// a request arrived before the server's read or idle timeout is closed
// without a response, over plain TCP and TLS, as net/http (kube-apiserver)
// closes it; a 400 there is what Go clients log as "Unsolicited response
// received on idle HTTP channel". A request cut short in its headers also
// gets nothing, and one cut short in its request line gets net/http's 400.
// (Checked beside kube-apiserver v1.37, which does the same after its 32 s
// ReadHeaderTimeout and 90 s IdleTimeout.)
func TestQuietConnectionsCloseWithoutAnswer(t *testing.T) {
	const request = "GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
	cases := []struct {
		name string
		// keepAlive sends request first and reads its 200.
		keepAlive bool
		send      string
		// want400 is net/http's answer to a request line cut short.
		want400 bool
	}{
		{name: "nothing sent"},
		{name: "kept alive, nothing more sent", keepAlive: true},
		{name: "header cut short", send: "GET /version HTTP/1.1\r\nHost: x\r\n"},
		{name: "kept alive, header cut short", keepAlive: true, send: "GET /version HTTP/1.1\r\nHo"},
		{name: "request line cut short", send: "GET /vers", want400: true},
		{name: "kept alive, request line cut short", keepAlive: true, send: "GET /v", want400: true},
	}
	for _, useTLS := range []bool{false, true} {
		srv := newServer(t, func(o *web.Options) {
			if useTLS {
				o.TLS = selfSignedTLS(t)
			}
		})
		web.SetConnTimeouts(srv, quietTimeout, quietTimeout)
		addr := strings.TrimPrefix(serveOn(t, srv), "http://")
		scheme := "http"
		if useTLS {
			scheme = "https"
			// A TCP connection that never starts its TLS handshake.
			t.Run("https: no handshake", func(t *testing.T) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				expectQuietClose(t, c, bufio.NewReader(c))
			})
		}
		for _, tc := range cases {
			t.Run(scheme+": "+tc.name, func(t *testing.T) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if useTLS {
					tlsc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
					tlsc.SetDeadline(time.Now().Add(10 * time.Second))
					if err := tlsc.Handshake(); err != nil {
						t.Fatalf("TLS handshake: %v", err)
					}
					c = tlsc
				}
				br := bufio.NewReader(c)
				if tc.keepAlive {
					c.SetDeadline(time.Now().Add(10 * time.Second))
					if _, err := io.WriteString(c, request); err != nil {
						t.Fatal(err)
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("reading the first response: %v", err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || resp.Close {
						t.Fatalf("first request: %d (close=%v), want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
					}
				}
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatal(err)
				}
				if !tc.want400 {
					expectQuietClose(t, c, br)
					return
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("want net/http's 400 for a request line cut short, got %v", err)
				}
				resp.Body.Close()
				if resp.StatusCode != 400 {
					t.Errorf("got %d for a request line cut short, want net/http's 400", resp.StatusCode)
				}
			})
		}
	}
}

// expectQuietClose fails unless the server closes c, after its timeout,
// without sending a byte.
func expectQuietClose(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	// Far beyond quietTimeout: a loaded machine's server may be late to
	// close, but a server that never closes fails this read.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server did not close the connection within 10 s (its timeout is %v); it sent %q", quietTimeout, got)
	}
	if len(got) > 0 {
		t.Errorf("the server sent %q before closing, want nothing (net/http closes silently)", got)
	}
}

// selfSignedTLS is a server TLS config with a fresh self-signed
// certificate for 127.0.0.1.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
