package web_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/web"
)

// TestPlainHTTPOnTLSPortIsTold: a plain HTTP request to a TLS server gets
// net/http's (kube-apiserver's) plain-text 400 saying so, not an empty
// reply; other bytes that are not TLS get nothing.
func TestPlainHTTPOnTLSPortIsTold(t *testing.T) {
	base := startServer(t, func(o *web.Options) { o.TLS = selfSignedTLS(t) })
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(base + "/version") // http:// on the TLS port
	if err != nil {
		t.Fatalf("plain GET on the TLS port: %v, want a 400 in plain text", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || string(body) != "Client sent an HTTP request to an HTTPS server.\n" {
		t.Errorf("plain GET on the TLS port: %d %q, want kube-apiserver's 400 %q", resp.StatusCode, body, "Client sent an HTTP request to an HTTPS server.\n")
	}

	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n"); err != nil {
		t.Fatal(err)
	}
	expectQuietClose(t, c, bufio.NewReader(c))
}
