package web

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

// readThrough writes in through crlfConn over a real pipe, the writer
// sending chunk bytes at a time and the reader reading into buffers of
// bufSize, and returns what the reader got.
func readThrough(t *testing.T, in string, chunk, bufSize int) string {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		defer client.Close()
		for s := in; s != ""; {
			n := min(chunk, len(s))
			if _, err := io.WriteString(client, s[:n]); err != nil {
				return
			}
			s = s[n:]
		}
	}()
	c := &crlfConn{Conn: server}
	var out strings.Builder
	buf := make([]byte, bufSize)
	for {
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			return out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCRLFConnRewritesHeaderBlocksOnly: every bare LF of a header block
// becomes CRLF however the bytes arrive; bodies, and everything after a
// request that declares one, pass untouched.
func TestCRLFConnRewritesHeaderBlocksOnly(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"bare", "GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"crlf untouched", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"mixed", "\nGET / HTTP/1.1\r\nHost: x\n\r\n", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"pipelined", "GET /a HTTP/1.1\nHost: x\n\nGET /b HTTP/1.1\nHost: x\n\n",
			"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"body ends the rewriting", "POST / HTTP/1.1\nCONTENT-length: 4\n\na\n\nGET / HTTP/1.1\nHost: x\n\n",
			"POST / HTTP/1.1\r\nCONTENT-length: 4\r\n\r\na\n\nGET / HTTP/1.1\nHost: x\n\n"},
		{"chunked ends the rewriting", "POST / HTTP/1.1\nTransfer-Encoding: chunked\n\n1\n\n\n",
			"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\n\n\n"},
		{"bare CR kept", "GET / HTTP/1.1\nX: a\rb\n\n", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"},
	} {
		for _, chunk := range []int{1, 2, 3, 1000} {
			for _, bufSize := range []int{1, 2, 7, 4096} {
				if got := readThrough(t, c.in, chunk, bufSize); got != c.want {
					t.Errorf("%s (chunks of %d, reads of %d): %q, want %q", c.name, chunk, bufSize, got, c.want)
				}
			}
		}
	}
}

// TestCRLFConnManyBareLFsFillReads: a header of many bare-LF lines is
// delivered in full reads, not one read per line: fasthttp parses the
// header again after every read that does not complete it.
func TestCRLFConnManyBareLFsFillReads(t *testing.T) {
	in := "GET / HTTP/1.1\nHost: x\n" + strings.Repeat("X-A: 1\n", 1500) + "\n"
	want := strings.ReplaceAll(in, "\n", "\r\n")
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		defer client.Close()
		_, _ = io.WriteString(client, in)
	}()
	c := &crlfConn{Conn: server}
	var out strings.Builder
	buf := make([]byte, 4096)
	reads := 0
	for out.Len() < len(want) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		reads++
		out.Write(buf[:n])
	}
	if out.String() != want {
		t.Fatalf("rewritten header differs (%d bytes, want %d)", out.Len(), len(want))
	}
	if most := len(want)/len(buf) + 3; reads > most {
		t.Errorf("%d reads for %d bytes in buffers of %d, want at most %d", reads, len(want), len(buf), most)
	}
}

// BenchmarkCRLFConnRead measures the cost on the common path: a CRLF
// GET with typical client-go headers, read through the wrapper ("crlf")
// and straight from the connection ("direct"); "bare-lf" is the same
// request with bare LFs, rewritten.
func BenchmarkCRLFConnRead(b *testing.B) {
	req := []byte("GET /apis/coordination.k8s.io/v1/namespaces/default/leases/my-lease HTTP/1.1\r\n" +
		"Host: 127.0.0.1:8080\r\nUser-Agent: kube-controller-manager/v1.37.1 (linux/amd64) kubernetes/abc/leader-election\r\n" +
		"Accept: application/vnd.kubernetes.protobuf, */*\r\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz\r\n" +
		"Accept-Encoding: gzip\r\n\r\n")
	for _, c := range []struct {
		name string
		conn net.Conn
	}{
		{"crlf", &crlfConn{Conn: &repeatConn{data: req}}},
		{"direct", &repeatConn{data: req}},
		{"bare-lf", &crlfConn{Conn: &repeatConn{data: bytes.ReplaceAll(req, []byte("\r\n"), []byte("\n"))}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(req)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.conn.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// repeatConn is a net.Conn whose reads return the same request forever.
type repeatConn struct {
	net.Conn
	data []byte
}

func (r *repeatConn) Read(p []byte) (int, error) { return copy(p, r.data), nil }
