package web_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMultipartBodyIsNotReadBeforeAuthentication: a multipart/form-data
// body is held to the same first 8 KiB before authentication as any other
// (TestBodyIsNotReadBeforeAuthentication). fasthttp parses such bodies
// itself before the handler runs unless told not to, whatever their
// Content-Length (beyond the body limit too), keeping 16 MiB of them in
// memory and the rest in temporary files: an unauthenticated client could
// make the server read and store any amount.
func TestMultipartBodyIsNotReadBeforeAuthentication(t *testing.T) {
	base := startServer(t, withToken)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	part := "--XX\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n\r\n"
	if _, err := io.WriteString(c, "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: multipart/form-data; boundary=XX\r\nContent-Length: 41943040\r\n\r\n"+part+strings.Repeat("a", 8<<10)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a 40 MiB multipart body announced, 8 KiB sent, within 10 s (the server waits for the rest?): %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("got %d, want 401", resp.StatusCode)
	}
}
