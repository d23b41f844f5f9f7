package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/storage/cluster"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// joinAnswer is one answer of the join endpoint.
type joinAnswer struct {
	code       int
	retryAfter string
	body       []byte
}

// message is the Status message of a refusal.
func (a joinAnswer) message() string {
	var st struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(a.body, &st)
	return st.Reason + ": " + st.Message
}

func postJoin(t *testing.T, c *http.Client, baseURL, path string, body []byte) joinAnswer {
	t.Helper()
	a, err := tryPostJoin(c, baseURL, path, body)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return a
}

// tryPostJoin is postJoin for the flood's goroutines: a member answers an
// oversize body early and closes, which may reset the connection under a
// client still sending it.
func tryPostJoin(c *http.Client, baseURL, path string, body []byte) (joinAnswer, error) {
	resp, err := c.Post(baseURL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return joinAnswer{}, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return joinAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: data}, nil
}

// handJoin runs the join handshake by hand, as an attacker sees it on
// plain-HTTP loopback: a nonce, a request with a CSR, its proof. It
// returns the answer and the exact body sent, for replays.
func handJoin(t *testing.T, c *http.Client, baseURL string, token []byte, req clusterapi.JoinRequest) (joinAnswer, []byte) {
	t.Helper()
	a := postJoin(t, c, baseURL, clusterapi.JoinNoncePath, nil)
	if a.code != http.StatusOK {
		return a, nil
	}
	var nr clusterapi.NonceResponse
	if err := json.Unmarshal(a.body, &nr); err != nil {
		t.Fatalf("nonce answer %s: %v", a.body, err)
	}
	if req.CSR == "" {
		key, _, err := pki.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		csr, err := pki.CreateCSR(key, req.Name, req.Hosts)
		if err != nil {
			t.Fatal(err)
		}
		req.CSR = string(csr)
	}
	req.Nonce = nr.Nonce
	req.Proof = clusterapi.JoinProof(token, nil, &req)
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return postJoin(t, c, baseURL, clusterapi.JoinPath, body), body
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address local: another source to the member's rate limits.
func clientFrom(t *testing.T, local string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestClusterJoinHardening: a cluster started without a token generates
// one (0600, never logged) and says how to join; a member joins with its
// file. A captured join body replayed, a forged proof, another cluster's
// token and oversize or invalid fields are refused with a clear Status
// and change nothing (no learner, no member). A flood of 510 joins, ten of
// them with a 1 MiB name, is answered 429 with Retry-After beyond the
// rate limits and grows the member's log by a bounded few lines; a
// joiner that waits as told gets in afterwards.
func TestClusterJoinHardening(t *testing.T) {
	testneeds.Slow(t, "embedded etcd members")
	t.Parallel()
	ports := freeLoopbackPorts(t, 4)
	m1 := &clusterMember{name: "m1", dataDir: t.TempDir(), args: []string{"--cluster-init", "--member-name", "m1",
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[1])}}
	m1.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("m1 log:\n%s", m1.ts.Log())
		}
	})

	// The generated token: 256 bits in a 0600 file, which the log names;
	// the token itself is in no log line.
	tokenFile := filepath.Join(m1.dataDir, "cluster", "token")
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatalf("--cluster-init without a token stored none: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(tokenFile)
	token := []byte(strings.TrimSpace(string(data)))
	if len(token) != 64 {
		t.Errorf("generated token of %d characters, want 64 hex digits", len(token))
	}
	// The join command is logged once the API serves, just after the
	// server reported ready.
	eventually(t, 10*time.Second, "the log says how to join with the token file", func() (bool, string) {
		log := m1.ts.Log()
		return strings.Contains(log, "--join "+m1.ts.reportedURL()+" --cluster-token-file") && strings.Contains(log, tokenFile), log
	})
	if strings.Contains(m1.ts.Log(), string(token)) {
		t.Errorf("the generated token is in the log")
	}

	c := &http.Client{Timeout: 30 * time.Second}
	base := m1.ts.URL

	// A replica's join, by hand: admitted, and its answer holds a
	// certificate for the key the joiner kept, and no private key.
	ok, captured := handJoin(t, c, base, token, clusterapi.JoinRequest{Name: "r-capture", Replica: true})
	if ok.code != http.StatusOK {
		t.Fatalf("a join with the right token: %d %s", ok.code, ok.message())
	}
	if strings.Contains(string(ok.body), "PRIVATE KEY") {
		t.Errorf("a replica's join answer carries a private key: %s", ok.body)
	}

	// The captured body, replayed: refused (its nonce is used).
	for i := range 3 {
		if a := postJoin(t, c, base, clusterapi.JoinPath, captured); a.code != http.StatusUnauthorized || !strings.Contains(a.message(), "nonce") {
			t.Errorf("replay %d of a captured join: %d %s, want 401 naming the used nonce", i+1, a.code, a.message())
		}
	}
	// The captured proof on a fresh nonce: refused (the proof covers
	// the nonce).
	var old clusterapi.JoinRequest
	_ = json.Unmarshal(captured, &old)
	a := postJoin(t, c, base, clusterapi.JoinNoncePath, nil)
	var nr clusterapi.NonceResponse
	_ = json.Unmarshal(a.body, &nr)
	forged := old
	forged.Nonce = nr.Nonce
	body, _ := json.Marshal(forged)
	if a := postJoin(t, c, base, clusterapi.JoinPath, body); a.code != http.StatusUnauthorized || !strings.Contains(a.message(), "proof does not verify") {
		t.Errorf("a captured proof on a fresh nonce: %d %s, want 401", a.code, a.message())
	}
	// Another cluster's token, asking for membership: refused, and no
	// learner appears.
	other := []byte(strings.Repeat("ab", 32))
	if a, _ := handJoin(t, c, base, other, clusterapi.JoinRequest{Name: "intruder", PeerURL: "https://127.0.0.1:1", ClientURL: "https://127.0.0.1:2",
		Hosts: []string{"127.0.0.1"}}); a.code != http.StatusUnauthorized || !strings.Contains(a.message(), "another cluster") {
		t.Errorf("another cluster's token: %d %s, want 401", a.code, a.message())
	}
	// Invalid and oversize names: refused before anything else.
	for name, want := range map[string]int{"a b/../c": 400, strings.Repeat("n", 300): 400} {
		a, _ := handJoin(t, c, base, token, clusterapi.JoinRequest{Name: name, Replica: true, CSR: "x"})
		if a.code != want {
			t.Errorf("a name of %d bytes: %d %s, want %d", len(name), a.code, a.message(), want)
		}
	}
	// An oversize body is answered 413 before it is read, and the
	// connection closed: a client still sending may see the reset instead.
	oversize, _ := json.Marshal(clusterapi.JoinRequest{Name: strings.Repeat("n", 1<<20), Replica: true, CSR: "x"})
	if a, err := tryPostJoin(c, base, clusterapi.JoinPath, oversize); err != nil {
		if !strings.Contains(err.Error(), "reset by peer") && !strings.Contains(err.Error(), "broken pipe") {
			t.Errorf("a 1 MiB name: %v, want 413 or the connection closed", err)
		}
	} else if a.code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 MiB name: %d %s, want 413", a.code, a.message())
	}
	if log := m1.ts.Log(); strings.Contains(log, "a b/../c") || strings.Contains(log, strings.Repeat("n", 300)) {
		t.Errorf("an invalid name was logged")
	}

	// A member joins with a copy of the token file.
	copied := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(copied, data, 0o600); err != nil {
		t.Fatal(err)
	}
	m2 := &clusterMember{name: "m2", dataDir: t.TempDir(), args: []string{"--join", base, "--cluster-token-file", copied, "--member-name", "m2",
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[3])}}
	m2.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("m2 log:\n%s", m2.ts.Log())
		}
	})
	if key, err := os.ReadFile(filepath.Join(m2.dataDir, "cluster", "pki", "member.key")); err != nil || !strings.Contains(string(key), "PRIVATE KEY") {
		t.Errorf("m2 keeps no key of its own: %v", err)
	}
	m1.waitHealthy(t, 2)

	// The flood: 500 small joins with a wrong proof and 10 with a 1 MiB
	// name, 8 at a time, from a source not seen before (127.0.0.2), so
	// that its one line a minute is part of what the log grows by.
	logBefore := len(m1.ts.Log())
	small, _ := json.Marshal(clusterapi.JoinRequest{Name: "guess", Replica: true, CSR: "x",
		Nonce: strings.Repeat("00", 32), Proof: strings.Repeat("00", 32)})
	huge, _ := json.Marshal(clusterapi.JoinRequest{Name: strings.Repeat("n", 1<<20), Replica: true})
	var mu sync.Mutex
	codes := map[int]int{}
	retryAfter := 0
	jobs := make(chan []byte)
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			fc := clientFrom(t, "127.0.0.2")
			for b := range jobs {
				a, err := tryPostJoin(fc, base, clusterapi.JoinPath, b)
				if err != nil && len(b) < 1<<20 {
					t.Errorf("a small flooding join: %v", err)
				}
				mu.Lock()
				codes[a.code]++
				if a.code == http.StatusTooManyRequests {
					if s, err := strconv.Atoi(a.retryAfter); err != nil || s < 1 || !strings.Contains(a.message(), "TooManyRequests") {
						t.Errorf("a 429 with Retry-After %q and %s: want seconds and a TooManyRequests Status", a.retryAfter, a.message())
					} else {
						retryAfter = max(retryAfter, s)
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range 510 {
		if i%51 == 0 {
			jobs <- huge
		} else {
			jobs <- small
		}
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	grew := len(m1.ts.Log()) - logBefore
	admitted := 510 - codes[http.StatusTooManyRequests] - codes[0] // 0: reset while sending 1 MiB
	t.Logf("flood of 510 joins in %v: answers %v; %d passed the rate limits (%.1f/s); the log grew by %d bytes",
		took.Round(time.Millisecond), codes, admitted, float64(admitted)/took.Seconds(), grew)
	if codes[http.StatusTooManyRequests] < 400 {
		t.Errorf("only %d of 510 flooding joins were rate limited (answers %v)", codes[http.StatusTooManyRequests], codes)
	}
	if codes[http.StatusOK] != 0 {
		t.Errorf("%d flooding joins were admitted", codes[http.StatusOK])
	}
	if lines := m1.ts.Log()[logBefore:]; grew > 4<<10 || !strings.Contains(lines, "Refused a cluster join") {
		t.Errorf("the flood grew the log by %d bytes, want one line of its refusals, a few at most:\n%s", grew, lines)
	}

	// A joiner that waits as told gets in.
	time.Sleep(time.Duration(retryAfter) * time.Second)
	eventually(t, 20*time.Second, "a join after the flood", func() (bool, string) {
		a, _ := handJoin(t, c, base, token, clusterapi.JoinRequest{Name: "r-after", Replica: true})
		return a.code == http.StatusOK, fmt.Sprintf("%d %s", a.code, a.message())
	})

	// Nothing the refused joins sent changed the membership.
	st, err := m1.status(t)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range st.Members {
		names = append(names, m.Name)
		if m.Learner {
			t.Errorf("a learner %q is left", m.Name)
		}
	}
	if len(names) != 2 {
		t.Errorf("members %v, want m1 and m2 only", names)
	}
}

// tlsSession is one TLS connection to a member's join endpoint, driven
// by hand.
type tlsSession struct {
	t        *testing.T
	conn     *tls.Conn
	r        *bufio.Reader
	hostPort string
	ekm      []byte
}

func openTLSSession(t *testing.T, hostPort string) *tlsSession {
	t.Helper()
	conn, err := tls.Dial("tcp", hostPort, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // the proofs authenticate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st := conn.ConnectionState()
	ekm, err := st.ExportKeyingMaterial(clusterapi.EKMLabel, nil, clusterapi.EKMLength)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsSession{t: t, conn: conn, r: bufio.NewReader(conn), hostPort: hostPort, ekm: ekm}
}

func (s *tlsSession) post(path string, body []byte) joinAnswer {
	s.t.Helper()
	hreq, _ := http.NewRequest(http.MethodPost, "https://"+s.hostPort+path, bytes.NewReader(body))
	hreq.Header.Set("Content-Type", "application/json")
	if err := hreq.Write(s.conn); err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.ReadResponse(s.r, hreq)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return joinAnswer{code: resp.StatusCode, body: data}
}

func (s *tlsSession) nonce() string {
	s.t.Helper()
	a := s.post(clusterapi.JoinNoncePath, nil)
	var nr clusterapi.NonceResponse
	if err := json.Unmarshal(a.body, &nr); err != nil || a.code != http.StatusOK {
		s.t.Fatalf("nonce answer %d %s", a.code, a.body)
	}
	return nr.Nonce
}

// TestClusterJoinOverTLS: over TLS the joiner's own code joins (and is
// refused with another cluster's token), and a join body is worth one
// request on its session: replayed on another session it is refused for
// its used nonce, and with that session's fresh nonce spliced in for its
// proof, which covers the first session's keying material and nonce.
func TestClusterJoinOverTLS(t *testing.T) {
	testneeds.Slow(t, "an embedded etcd member")
	t.Parallel()
	ports := freeLoopbackPorts(t, 2)
	m1 := &clusterMember{name: "m1", dataDir: t.TempDir(), args: []string{"--cluster-init", "--member-name", "m1", "--tls-auto",
		"--cluster-cert-validity", "10s", // r-tls's certificate expires within the test
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[1])}}
	m1.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("m1 log:\n%s", m1.ts.Log())
		}
	})
	apiURL := m1.ts.reportedURL()
	if !strings.HasPrefix(apiURL, "https://") {
		t.Fatalf("--tls-auto serves %s", apiURL)
	}
	data, _ := os.ReadFile(filepath.Join(m1.dataDir, "cluster", "token"))
	token := []byte(strings.TrimSpace(string(data)))

	// The joiner's own code, as serve --join --replica runs it.
	key, _, _ := pki.GenerateKey()
	csr, _ := pki.CreateCSR(key, "r-tls", nil)
	resp, _, err := cluster.Join(context.Background(), apiURL, token, clusterapi.JoinRequest{Name: "r-tls", Replica: true, CSR: string(csr)})
	if err != nil {
		t.Fatalf("a join over TLS: %v", err)
	}
	if err := pki.CheckIssued([]byte(resp.Cert), []byte(resp.CACert), key, "r-tls"); err != nil {
		t.Errorf("the certificate of a join over TLS: %v", err)
	}
	other := []byte(strings.Repeat("ab", 32))
	_, _, err = cluster.Join(context.Background(), apiURL, other, clusterapi.JoinRequest{Name: "r-x", Replica: true, CSR: string(csr)})
	if err == nil || !strings.Contains(err.Error(), "(401)") {
		t.Errorf("a join over TLS with another cluster's token: %v, want 401", err)
	}

	hostPort := strings.TrimPrefix(apiURL, "https://")
	s1 := openTLSSession(t, hostPort)
	hcsr, _ := pki.CreateCSR(key, "r-hand", nil)
	req := clusterapi.JoinRequest{Name: "r-hand", Replica: true, CSR: string(hcsr), Nonce: s1.nonce()}
	req.Proof = clusterapi.JoinProof(token, s1.ekm, &req)
	body, _ := json.Marshal(req)
	if a := s1.post(clusterapi.JoinPath, body); a.code != http.StatusOK {
		t.Fatalf("a hand-made join over TLS: %d %s", a.code, a.message())
	}
	if a := openTLSSession(t, hostPort).post(clusterapi.JoinPath, body); a.code != http.StatusUnauthorized || !strings.Contains(a.message(), "nonce") {
		t.Errorf("the body replayed on another session: %d %s, want 401 for the used nonce", a.code, a.message())
	}
	s3 := openTLSSession(t, hostPort)
	spliced := req
	spliced.Nonce = s3.nonce()
	body, _ = json.Marshal(spliced)
	if a := s3.post(clusterapi.JoinPath, body); a.code != http.StatusUnauthorized || !strings.Contains(a.message(), "proof does not verify") {
		t.Errorf("the captured proof with a fresh nonce on another session: %d %s, want 401", a.code, a.message())
	}

	// The renewal of an expired certificate (a device back after its
	// validity) proves the token the same way: renewed on its session;
	// its proof with another session's fresh nonce is refused (403).
	expiry, err := pki.ParseCertificate([]byte(resp.Cert))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(expiry.NotAfter) + time.Second)
	r1 := openTLSSession(t, hostPort)
	rcsr, _ := pki.CreateCSR(key, "r-tls", nil)
	renew := clusterapi.RenewRequest{Cert: resp.Cert, CSR: string(rcsr), Nonce: r1.nonce()}
	renew.Proof = clusterapi.RenewProof(token, r1.ekm, &renew)
	body, _ = json.Marshal(renew)
	a := r1.post(clusterapi.RenewPath, body)
	var renewed clusterapi.RenewResponse
	if err := json.Unmarshal(a.body, &renewed); a.code != http.StatusOK || err != nil || renewed.Cert == "" {
		t.Fatalf("the renewal of an expired certificate over TLS: %d %s", a.code, a.message())
	}
	if err := pki.CheckIssued([]byte(renewed.Cert), []byte(resp.CACert), key, "r-tls"); err != nil {
		t.Errorf("the renewed certificate: %v", err)
	}
	r2 := openTLSSession(t, hostPort)
	renew.Nonce = r2.nonce()
	body, _ = json.Marshal(renew)
	if a := r2.post(clusterapi.RenewPath, body); a.code != http.StatusForbidden || !strings.Contains(a.message(), "cluster token") {
		t.Errorf("the renewal's proof with a fresh nonce on another session: %d %s, want 403", a.code, a.message())
	}
}
