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
// gets nothing, and one cut short in its request line gets net/http's 400;
// one cut short in its body is answered, 400.
// (Checked beside kube-apiserver v1.37, which does the same after its 32 s
// ReadHeaderTimeout and 90 s IdleTimeout.)
func TestQuietConnectionsCloseWithoutAnswer(t *testing.T) {
	const (
		get   = "GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
		lease = `{"metadata":{"generateName":"q-"}}`
		// post has a body, which ends crlfConn's following of the lines.
		postHeader = "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\n" +
			"Content-Type: application/json\r\nContent-Length: 34\r\n\r\n"
		post    = postHeader + lease
		bodyCut = postHeader + `{"meta`
	)
	if len(lease) != 34 {
		t.Fatalf("the lease is %d bytes, not the Content-Length", len(lease))
	}
	cases := []struct {
		name string
		// first, when set, is sent and answered (wantFirst) first, the
		// connection kept alive.
		first     string
		wantFirst int
		send      string
		// want is the status of the answer, 0 for none: net/http's 400
		// for a request line cut short, and 400 for a body cut short,
		// whose client awaits an answer (readBody's, see quietclose.go).
		want int
	}{
		{name: "nothing sent"},
		{name: "kept alive, nothing more sent", first: get, wantFirst: 200},
		{name: "kept alive after a body, nothing more sent", first: post, wantFirst: 201},
		{name: "header cut short", send: "GET /version HTTP/1.1\r\nHost: x\r\n"},
		{name: "kept alive, header cut short", first: get, wantFirst: 200, send: "GET /version HTTP/1.1\r\nHo"},
		{name: "kept alive after a body, header cut short", first: post, wantFirst: 201, send: "GET /version HTTP/1.1\r\nHo"},
		{name: "request line cut short", send: "GET /vers", want: 400},
		{name: "kept alive, request line cut short", first: get, wantFirst: 200, send: "GET /v", want: 400},
		{name: "body cut short", send: bodyCut, want: 400},
		{name: "kept alive after a body, body cut short", first: post, wantFirst: 201, send: bodyCut, want: 400},
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
				t.Parallel()
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
				// Each case waits out the timeout: together, they wait once.
				t.Parallel()
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
				if tc.first != "" {
					c.SetDeadline(time.Now().Add(10 * time.Second))
					if _, err := io.WriteString(c, tc.first); err != nil {
						t.Fatal(err)
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("reading the first response: %v", err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != tc.wantFirst || resp.Close {
						t.Fatalf("first request: %d (close=%v) %s, want %d on a kept-alive connection", resp.StatusCode, resp.Close, body, tc.wantFirst)
					}
				}
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatal(err)
				}
				if tc.want == 0 {
					expectQuietClose(t, c, br)
					return
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("want an answer %d, got %v", tc.want, err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("got %d, want %d", resp.StatusCode, tc.want)
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
