package e2e

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Hostile reproducers at the protocol's edges, against the real binary:
// requests kube-apiserver (net/http) answers that once went unanswered,
// and answers whose status differed from kube-apiserver's.

// answeredWithin bounds how long a request may take to be answered on an
// idle loopback server, however loaded the test machine: generous, but
// far below the server's 30s read timeout that a hang would reach.
const answeredWithin = 5 * time.Second

// protoExchange writes raw on conn and reads n responses, each within
// answeredWithin of the write.
func protoExchange(t *testing.T, conn net.Conn, raw string, n int) []*http.Response {
	t.Helper()
	start := time.Now()
	if err := conn.SetDeadline(start.Add(answeredWithin)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []*http.Response
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d to %q not read within %v: %v", len(out)+1, raw, answeredWithin, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		out = append(out, resp)
	}
	t.Logf("%d response(s) to %q in %v", n, raw, time.Since(start).Round(time.Millisecond))
	return out
}

func bodyOf(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// TestE2EHostileProtocolBareLF: a request whose header lines end in a bare
// LF hung until the read timeout; net/http serves it, and so must we, at
// once, alone or pipelined, and the server keeps serving.
func TestE2EHostileProtocolBareLF(t *testing.T) {
	ts := startServer(t)
	addr := strings.TrimPrefix(ts.URL, "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	r := protoExchange(t, dial(), "GET /version HTTP/1.1\nHost: x\n\n", 1)[0]
	if b := bodyOf(r); r.StatusCode != 200 || !strings.Contains(b, `"gitVersion"`) {
		t.Errorf("bare-LF GET /version: %d %s", r.StatusCode, b)
	}
	rs := protoExchange(t, dial(), "GET /livez HTTP/1.1\nHost: x\n\nGET /version HTTP/1.1\r\nHost: x\r\n\n"+
		"GET /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\nHost: x\nConnection: close\n\n", 3)
	for i, want := range []string{"ok", `"gitVersion"`, `"kind":"LeaseList"`} {
		if b := bodyOf(rs[i]); rs[i].StatusCode != 200 || !strings.Contains(b, want) {
			t.Errorf("pipelined response %d: %d %s", i+1, rs[i].StatusCode, b)
		}
	}
	// A body is never rewritten: a CR inserted into this one would push
	// its last byte past Content-Length.
	body := "{\n\"metadata\":{\"name\":\"bare-lf\"},\n\n\"spec\":{\"holderIdentity\":\"a\"}}"
	r = protoExchange(t, dial(), "POST /apis/coordination.k8s.io/v1/namespaces/default/leases HTTP/1.1\nHost: x\n"+
		"Content-Type: application/json\nContent-Length: "+strconv.Itoa(len(body))+"\n\n"+body, 1)[0]
	if b := bodyOf(r); r.StatusCode != 201 || !strings.Contains(b, `"holderIdentity":"a"`) {
		t.Errorf("bare-LF POST: %d %s", r.StatusCode, b)
	}
	if resp, err := http.Get(ts.URL + "/apis/coordination.k8s.io/v1/namespaces/default/leases/bare-lf"); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET after the bare-LF requests: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestE2EHostileProtocolBareLFOverTLS: the same over TLS, where the client
// certificate must still authenticate: a bare-LF request gets exactly the
// answer of its CRLF twin, with and without the certificate.
func TestE2EHostileProtocolBareLFOverTLS(t *testing.T) {
	s := startSecureServer(t)
	addr := strings.TrimPrefix(s.base, "https://")
	const path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	for _, useCert := range []bool{true, false} {
		var answers [2]string
		for i, eol := range []string{"\r\n", "\n"} {
			tc := &tls.Config{RootCAs: s.client}
			if useCert {
				tc.Certificates = []tls.Certificate{s.cert}
			}
			conn, err := tls.Dial("tcp", addr, tc)
			if err != nil {
				t.Fatal(err)
			}
			r := protoExchange(t, conn, "GET "+path+" HTTP/1.1"+eol+"Host: x"+eol+eol, 1)[0]
			conn.Close()
			answers[i] = r.Status + " " + bodyOf(r)
		}
		if answers[0] != answers[1] {
			t.Errorf("client certificate %v: CRLF answer %q, bare LF %q", useCert, answers[0], answers[1])
		}
		if ok := strings.HasPrefix(answers[0], "200 "); ok != useCert {
			t.Errorf("client certificate %v: %q", useCert, answers[0])
		}
	}
}

// TestE2EHostileProtocolStatusCodes: status codes that differed from
// kube-apiserver's, with the exact bodies it sends.
func TestE2EHostileProtocolStatusCodes(t *testing.T) {
	ts := startServer(t)
	leases := ts.URL + "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	send := func(method, url, contentType, body string) (int, string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := send("POST", leases, "application/json", `{"metadata":{"name":"l"}}`); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	const invalidRV = `resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax`
	for _, c := range []struct {
		what, method, url, contentType, body string
		code                                 int
		want                                 string
	}{
		{"list", "GET", leases + "?resourceVersion=abc", "", "", 400,
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"invalid resource version: ` + invalidRV + `","reason":"BadRequest","code":400}` + "\n"},
		{"watch", "GET", leases + "?watch=1&resourceVersion=abc", "", "", 500,
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"` + invalidRV + `","code":500}` + "\n"},
		{"get", "GET", leases + "/l?resourceVersion=abc", "", "", 500,
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"` + invalidRV + `","code":500}` + "\n"},
		{"delete body", "DELETE", leases + "/l", "application/json", `{"propagationPolicy":`, 400,
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"couldn't get version/kind; json parse error: unexpected end of JSON input","reason":"BadRequest","code":400}` + "\n"},
		{"decisions namespace", "GET", ts.URL + "/ui/api/v1/namespaces/NS/leases/l/decisions", "", "", 404,
			`{"message":"no lease can be in namespace \"NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"}`},
		{"decisions name", "GET", ts.URL + "/ui/api/v1/namespaces/default/leases/" + strings.Repeat("x", 300) + "/decisions", "", "", 404,
			`{"message":"no lease can be named \"` + strings.Repeat("x", 300) + `\": must be no more than 253 characters"}`},
	} {
		start := time.Now()
		code, b := send(c.method, c.url, c.contentType, c.body)
		if code != c.code || b != c.want {
			t.Errorf("%s: %d %s\nwant %d %s", c.what, code, b, c.code, c.want)
		}
		if d := time.Since(start); d > answeredWithin {
			t.Errorf("%s answered in %v, want under %v", c.what, d, answeredWithin)
		}
	}
	if code, b := send("GET", leases+"/l", "", ""); code != 200 {
		t.Errorf("the lease after the malformed requests: %d %s", code, b)
	}
}
