package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/storage/etcd"
)

// TestClusterRemovedMemberStaysOut is the stolen device: m3 of three
// members dies, a copy of its data directory is kept, and "cluster
// remove m3" runs while leases are renewed through m1. The copy then
// cannot read or write the survivors' etcd with m3's certificate, nor with
// one it mints with the CA key it holds; it cannot join with the token it
// holds; started, it cannot peer (it stops). The survivors keep serving
// leases, and a new device joins with the rotated token.
func TestClusterRemovedMemberStaysOut(t *testing.T) {
	testneeds.Slow(t, "a three-member embedded etcd cluster")
	t.Parallel()
	members := startCluster(t)
	ctx := context.Background()

	// Renewals through m1 all along.
	leases := clientset(t, restConfig(t, members[0].ts, wireProtobuf)).CoordinationV1().Leases("default")
	holder := "m1-holder"
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "trust"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var renewed []time.Time
	var failures []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			l, err := leases.Get(rctx, "trust", metav1.GetOptions{})
			if err == nil {
				now := metav1.NewMicroTime(time.Now())
				l.Spec.RenewTime = &now
				_, err = leases.Update(rctx, l, metav1.UpdateOptions{})
			}
			cancel()
			mu.Lock()
			if err != nil {
				failures = append(failures, time.Now().Format(time.StampMilli)+" "+err.Error())
			} else {
				renewed = append(renewed, time.Now())
			}
			mu.Unlock()
		}
	}()

	// The device dies (stolen, powered off); its disk is copied.
	m3 := members[2]
	m3.ts.proc.kill()
	stolen := filepath.Join(t.TempDir(), "stolen")
	if out, err := exec.Command("cp", "-a", m3.dataDir, stolen).CombinedOutput(); err != nil {
		t.Fatalf("copy m3's data directory: %v: %s", err, out)
	}

	start := time.Now()
	code, out, errOut := runCLI(t, "cluster", "remove", "m3", "--timeout", "60s", "--kubeconfig", members[0].ts.Kubeconfig)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("cluster remove m3: exit %d: %s%s", code, out, errOut)
	}
	t.Logf("MEASURED: cluster remove m3 (revoke its certificates, rotate the token, remove the member) took %v", took.Round(time.Millisecond))

	// Read and write with m3's own certificate, at both survivors.
	pkiDir := filepath.Join(stolen, "cluster", "pki")
	for _, m := range members[:2] {
		url := memberClientURL(t, m)
		cli := etcdClientWith(t, url, filepath.Join(pkiDir, "ca.crt"), filepath.Join(pkiDir, "member.crt"), filepath.Join(pkiDir, "member.key"))
		_, err := cli.Get(ctx, "/leasehold/", clientv3.WithPrefix())
		wantEtcdDenied(t, "the removed member's certificate reads "+m.name, err)
		_, err = cli.Put(ctx, "/leasehold/stolen", "x")
		wantEtcdDenied(t, "the removed member's certificate writes "+m.name, err)
		_, err = cli.MemberAddAsLearner(ctx, []string{"https://127.0.0.1:1"})
		wantEtcdDenied(t, "the removed member's certificate adds a member at "+m.name, err)
	}

	// A certificate minted with the CA key the copy holds.
	caCert, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(pkiDir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseAuthority(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	mintedCert, mintedKey, err := ca.IssuePeer("m1", []string{"127.0.0.1", "::1", "localhost"}, pki.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	mintDir := t.TempDir()
	for name, data := range map[string][]byte{"m.crt": mintedCert, "m.key": mintedKey} {
		if err := os.WriteFile(filepath.Join(mintDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	minted := etcdClientWith(t, memberClientURL(t, members[0]), filepath.Join(pkiDir, "ca.crt"), filepath.Join(mintDir, "m.crt"), filepath.Join(mintDir, "m.key"))
	_, err = minted.Get(ctx, "/leasehold/", clientv3.WithPrefix())
	wantEtcdDenied(t, "a certificate minted with the stolen CA key", err)

	// Join with the token the copy holds.
	joinPorts := freeLoopbackPorts(t, 2)
	p, ready := spawnServer(t, []string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "info",
		"--join", members[0].ts.URL, "--cluster-token-file", filepath.Join(stolen, "cluster", "token"), "--member-name", "m3again",
		"--peer-listen", "127.0.0.1:" + strconv.Itoa(joinPorts[0]), "--cluster-client-listen", "127.0.0.1:" + strconv.Itoa(joinPorts[1])}, nil)
	if ready {
		t.Errorf("a join with the removed device's token succeeded")
	} else if log := p.log.String(); !strings.Contains(log, "token") {
		t.Errorf("the refused join does not say the token is wrong; log:\n%s", log)
	}

	// The copy started elsewhere: the survivors' peer ports refuse its
	// certificate at the handshake, so it never gets a quorum nor ready.
	if ready, log := serveFor(t, 15*time.Second, "--listen", "127.0.0.1:0", "--data-dir", stolen, "--log-level", "info"); ready {
		t.Errorf("the removed member's copy started and became ready; log:\n%s", log)
	} else if !strings.Contains(log, "bad certificate") {
		t.Errorf("the removed member's copy does not say its peers refuse its certificate; log:\n%s", lastLines(log, 20))
	}

	// The survivors: two healthy voters, renewals through m1 go on.
	members[0].waitHealthy(t, 2)
	eventually(t, 30*time.Second, "renewals through m1 after the removal", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, at := range renewed {
			if at.After(start.Add(took)) {
				n++
			}
		}
		return n >= 20, strconv.Itoa(n) + " renewals since the removal"
	})
	close(stop)
	<-done
	mu.Lock()
	t.Logf("renewals: %d ok, %d failed (during m3's death and removal: %v)", len(renewed), len(failures), failures)
	mu.Unlock()

	// A new device joins with the rotated token, which every survivor's
	// token file now holds.
	tok1, _ := os.ReadFile(filepath.Join(members[0].dataDir, "cluster", "token"))
	tok2, _ := os.ReadFile(filepath.Join(members[1].dataDir, "cluster", "token"))
	if string(tok1) != string(tok2) || strings.TrimSpace(string(tok1)) == "e2e-cluster-token" || len(strings.TrimSpace(string(tok1))) != 64 {
		t.Fatalf("the survivors' token files hold %q and %q, want the same new 256-bit token", tok1, tok2)
	}
	newPorts := freeLoopbackPorts(t, 2)
	m4 := &clusterMember{name: "m4", dataDir: t.TempDir(), args: []string{"--cluster-token-file", filepath.Join(members[1].dataDir, "cluster", "token"),
		"--member-name", "m4", "--join", members[1].ts.URL,
		"--peer-listen", "127.0.0.1:" + strconv.Itoa(newPorts[0]), "--cluster-client-listen", "127.0.0.1:" + strconv.Itoa(newPorts[1])}}
	m4.start(t)
	m4.waitHealthy(t, 3)
}

// memberClientURL is m's etcd client URL, from its state file.
func memberClientURL(t *testing.T, m *clusterMember) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(m.dataDir, "cluster", "member.json"))
	if err != nil {
		t.Fatal(err)
	}
	const field = `"advertiseClient": "`
	i := strings.Index(string(data), field)
	if i < 0 {
		t.Fatalf("no client URL in %s", data)
	}
	rest := string(data[i+len(field):])
	return rest[:strings.IndexByte(rest, '"')]
}

// etcdClientWith is an etcd client of url presenting the given certificate.
func etcdClientWith(t *testing.T, url, caFile, certFile, keyFile string) *clientv3.Client {
	t.Helper()
	tlsCfg, err := etcd.TLSConfig(caFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: tlsCfg, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func wantEtcdDenied(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("%s: got %v, want PermissionDenied", what, err)
	}
}

// serveFor runs "leasehold serve args" for d and reports whether it got
// ready, and its log; it is killed at the end.
func serveFor(t *testing.T, d time.Duration, args ...string) (bool, string) {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "ready")
	var log syncWriter
	log.w = new(bytes.Buffer)
	cmd := exec.Command(leaseholdBinary(t), append([]string{"serve", "--ready-file", readyFile}, args...)...)
	cmd.SysProcAttr = childSysProcAttr()
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	deadline := time.After(d)
	for {
		if _, err := os.Stat(readyFile); err == nil {
			return true, log.String()
		}
		select {
		case <-exited:
			return false, log.String()
		case <-deadline:
			return false, log.String()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
