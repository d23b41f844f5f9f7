package web_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawResponses writes raw to a fresh connection and reads n responses,
// failing rather than waiting past a generous deadline: the bug was a
// request left unanswered until the server's read timeout.
func rawResponses(t *testing.T, base, raw string, n int) []response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []response
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d of %q: %v", len(out)+1, raw, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, response{resp.StatusCode, resp.Header, string(b)})
	}
	return out
}

// TestBareLFRequestsAreServed: kube-apiserver (net/http) serves request
// headers whose lines end in a bare LF; so must we, whatever mix of line
// endings ends the header block. (Each case was checked against a Go 1.26
// net/http server.)
func TestBareLFRequestsAreServed(t *testing.T) {
	base := startServer(t, nil)
	version := wireSample(t, "version.json")
	for _, raw := range []string{
		"GET /version HTTP/1.1\nHost: x\n\n",
		"GET /version HTTP/1.1\r\nHost: x\r\n\n",
		"GET /version HTTP/1.1\nHost: x\n\r\n",
		"GET /version HTTP/1.1\r\nHost: x\nAccept: */*\n\n",
		"GET /version HTTP/1.0\n\n",
		"GET /version HTTP/1.1\nHost: x\nX-Folded: a\n b\n\n",
		"GET /version HTTP/1.1\nHost: x\n" + strings.Repeat("X-A: 1\n", 1500) + "\n",
	} {
		r := rawResponses(t, base, raw, 1)[0]
		r.expect(t, 200, version)
	}
}

// TestBareLFPipelined: requests without bodies follow each other on one
// connection, each header block rewritten, in every mix of line endings.
func TestBareLFPipelined(t *testing.T) {
	base := startServer(t, nil)
	version := wireSample(t, "version.json")
	rs := rawResponses(t, base, "GET /version HTTP/1.1\nHost: x\n\n"+
		"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /version HTTP/1.1\nHost: x\n\n"+
		"GET /version HTTP/1.1\nHost: x\nConnection: close\n\n", 4)
	for _, r := range rs {
		r.expect(t, 200, version)
	}
}

// TestBareLFBodiesUntouched: a request body is never rewritten, even when
// its header block was. A CR inserted into the body would shift it by one
// byte past Content-Length and cut off its closing brace.
func TestBareLFBodiesUntouched(t *testing.T) {
	base := startServer(t, nil)
	body := "{\n\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\n\n\"metadata\":{\"name\":\"lf\"}}"
	header := "POST " + leasesPath + " HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: " + strconv.Itoa(len(body)) + "\n\n"
	crlfHeader := strings.ReplaceAll(header, "\n", "\r\n")
	crlfHeader = strings.Replace(crlfHeader, `"name":"lf"`, `"name":"lf2"`, 1)
	body2 := strings.Replace(body, `"name":"lf"`, `"name":"lf2"`, 1)
	crlfHeader = strings.Replace(crlfHeader, "Content-Length: "+strconv.Itoa(len(body)), "Content-Length: "+strconv.Itoa(len(body2)), 1)
	rs := rawResponses(t, base, header+body+
		crlfHeader+body2+
		"GET "+leasesPath+"/lf2 HTTP/1.1\r\nHost: x\r\n\r\n", 3)
	for i, want := range []int{201, 201, 200} {
		if rs[i].code != want || !strings.Contains(rs[i].body, `"kind":"Lease"`) {
			t.Errorf("response %d: %d %s", i+1, rs[i].code, rs[i].body)
		}
	}
	// A bare-LF header block followed by a body that itself looks like
	// a bare-LF request: the body stays a body.
	smuggled := "GET /version HTTP/1.1\nHost: x\n\n"
	rs = rawResponses(t, base, "POST "+leasesPath+" HTTP/1.1\nHost: x\nContent-Type: application/json\ncontent-length: "+strconv.Itoa(len(smuggled))+"\n\n"+smuggled, 1)
	if rs[0].code != 400 || !strings.Contains(rs[0].body, `"reason":"BadRequest"`) {
		t.Errorf("body that looks like a request: %d %s", rs[0].code, rs[0].body)
	}
}
