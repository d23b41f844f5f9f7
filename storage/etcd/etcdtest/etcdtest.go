// Package etcdtest starts real etcd servers (Debian's etcd-server,
// /usr/bin/etcd) for tests: single members and small clusters on loopback
// ports with throw-away data directories. A missing binary fails the test
// with the install line; only the fast tier (go test -short) skips it.
package etcdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// InstallHint is how to get the etcd binary the tests run.
const InstallHint = "apt-get install -y etcd-server"

// Cluster is a running etcd cluster.
type Cluster struct {
	Members []*Member
}

// Member is one etcd process.
type Member struct {
	Name      string
	ClientURL string

	cmd    *exec.Cmd
	exited chan struct{}
	out    *syncBuffer
	mu     sync.Mutex
	killed bool
	frozen bool
}

// Start runs an n-member cluster and waits until every member is healthy.
// The processes are killed when the test ends.
func Start(tb testing.TB, n int) *Cluster {
	tb.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		bin, err = exec.LookPath("/usr/bin/etcd")
	}
	if err != nil {
		// The etcd backend is tested against a real server.
		testneeds.Check(tb, &testneeds.Missing{What: "etcd", Hint: InstallHint})
	}
	ports := freePorts(tb, 2*n)
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	token := fmt.Sprintf("leasehold-test-%d", time.Now().UnixNano())
	c := &Cluster{}
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			exited:    make(chan struct{}),
			out:       &syncBuffer{},
		}
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		m.cmd = exec.Command(bin,
			"--name", m.Name,
			"--data-dir", tb.TempDir(),
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", token,
			"--logger", "zap", "--log-level", "warn",
		)
		m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
		if err := m.cmd.Start(); err != nil {
			tb.Fatalf("start etcd %s: %v", m.Name, err)
		}
		go func() { _ = m.cmd.Wait(); close(m.exited) }()
		c.Members = append(c.Members, m)
	}
	tb.Cleanup(func() {
		for _, m := range c.Members {
			m.Kill()
			if tb.Failed() {
				tb.Logf("etcd %s output (tail):\n%s", m.Name, m.out.tail(3000))
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range c.Members {
		for !m.healthy() {
			select {
			case <-m.exited:
				tb.Fatalf("etcd %s exited during startup:\n%s", m.Name, m.out.tail(3000))
			default:
			}
			if time.Now().After(deadline) {
				tb.Fatalf("etcd %s not healthy after 30s:\n%s", m.Name, m.out.tail(3000))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// Endpoints are the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Leader returns the member that currently leads the cluster, asking the
// live members.
func (c *Cluster) Leader(tb testing.TB) *Member {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		for _, m := range c.Members {
			if m.isKilled() || m.isFrozen() {
				continue
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				continue
			}
			st, err := cli.Status(ctx, m.ClientURL)
			cli.Close()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return m
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatal("no etcd member reports itself as leader")
	return nil
}

func (m *Member) isKilled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killed
}

func (m *Member) isFrozen() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frozen
}

// Freeze stops the member with SIGSTOP: its connections stay open and
// its kernel accepts what is sent, but nothing is answered, as a member
// cut off the network behaves towards a client that still has a
// connection to it.
func (m *Member) Freeze(tb testing.TB) {
	tb.Helper()
	m.signal(tb, syscall.SIGSTOP, true)
}

// Thaw resumes a frozen member with SIGCONT.
func (m *Member) Thaw(tb testing.TB) {
	tb.Helper()
	m.signal(tb, syscall.SIGCONT, false)
}

func (m *Member) signal(tb testing.TB, sig syscall.Signal, frozen bool) {
	tb.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.killed {
		tb.Fatalf("etcd member %s was killed", m.Name)
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("signal etcd member %s: %v", m.Name, err)
	}
	m.frozen = frozen
}

// Kill ends the member with SIGKILL (a crash) and waits for it.
func (m *Member) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.killed {
		return
	}
	m.killed = true
	_ = m.cmd.Process.Kill()
	<-m.exited
}

// healthy asks the member's /health endpoint, which is true once the
// member is part of a cluster with a leader.
func (m *Member) healthy() bool {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get(m.ClientURL + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
}

// freePorts reserves n distinct loopback ports; they are released just
// before etcd binds them.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("reserve a port: %v", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// syncBuffer collects a process's output for failure reports.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
