package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/pki"
	"github.com/leasehold/leasehold/internal/testneeds"
)

// rejoinValidity is the test's --cluster-cert-validity: long enough for
// the running devices to renew on a busy machine (at about 13 s, with
// 7 s to spare), short enough that a device off for it costs seconds.
const rejoinValidity = "20s"

// TestClusterRejoinAfterExpiry: devices whose certificates expired while
// they were off come back with the token and nothing else. Three members
// and two replicas run with 20 s certificates; m1 (the first member, which
// joined through nobody) and the replica r1 stop, r2 stops and is revoked
// (which rotates the token), a Lease is written meanwhile, and the test
// waits until the three stopped certificates have expired. m1 restarts
// with its data directory alone: it renews its certificate through the
// other members' APIs it kept (its token file followed the rotation, it
// was off after it), rejoins the quorum, and serves both Leases. r1 started with the token from before the rotation
// is refused, saying to pass the current one; with it, it comes back and
// serves. Both then renew on their own schedule. The revoked r2 does not
// come back, even with the current token.
func TestClusterRejoinAfterExpiry(t *testing.T) {
	testneeds.Slow(t, "a three-member embedded etcd cluster and two replicas whose certificates expire while they are off")
	t.Parallel()
	ctx := context.Background()
	members := startClusterOf(t, nil, "", "--cluster-cert-validity", rejoinValidity)
	ports := freeLoopbackPorts(t, 2) // the replicas' listeners
	r1 := startRejoinReplica(t, "r1", t.TempDir(), fmt.Sprintf("127.0.0.1:%d", ports[0]), "--join", members[0].ts.URL, "--cluster-token", "e2e-cluster-token", "--replica")
	r2 := startRejoinReplica(t, "r2", t.TempDir(), fmt.Sprintf("127.0.0.1:%d", ports[1]), "--join", members[0].ts.URL, "--cluster-token", "e2e-cluster-token", "--replica")

	leases := func(ts *testServer) interface {
		Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
		Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
		Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
	} {
		return clientset(t, restConfig(t, ts, wireProtobuf)).CoordinationV1().Leases("default")
	}
	create := func(ts *testServer, name string) {
		t.Helper()
		holder := name
		if _, err := leases(ts).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Lease %s: %v", name, err)
		}
	}
	create(members[0].ts, "before")

	// r2 goes off and is revoked meanwhile; the revocation rotates the
	// token (m1 still runs and follows it). Then m1, once it kept the
	// other members' API URLs, and r1 go off too, and a Lease is written
	// without them.
	r2.ts.Stop(t)
	if code, out, errOut := runCLI(t, "cluster", "revoke", "r2", "--kubeconfig", members[1].ts.Kubeconfig); code != 0 {
		t.Fatalf("cluster revoke r2: exit %d\n%s%s", code, out, errOut)
	}
	token := filepath.Join(members[1].dataDir, "cluster", "token")
	eventually(t, 10*time.Second, "m1's token file follows the rotation", func() (bool, string) {
		a, _ := os.ReadFile(token)
		b, _ := os.ReadFile(filepath.Join(members[0].dataDir, "cluster", "token"))
		return len(a) > 0 && string(a) == string(b), string(b)
	})
	eventually(t, 10*time.Second, "m1 keeps m2's and m3's API URLs", func() (bool, string) {
		data, _ := os.ReadFile(filepath.Join(members[0].dataDir, "cluster", "member-apis.json"))
		return strings.Contains(string(data), members[1].ts.URL) && strings.Contains(string(data), members[2].ts.URL), string(data)
	})
	members[0].ts.Stop(t)
	r1.ts.Stop(t)
	off := time.Now()
	create(members[1].ts, "while-off")

	// Off until every stopped certificate has expired.
	certs := map[string]string{"m1": filepath.Join(members[0].dataDir, "cluster", "pki", "member.crt"),
		"r1": filepath.Join(r1.dataDir, "replica", "client.crt"), "r2": filepath.Join(r2.dataDir, "replica", "client.crt")}
	var last time.Time
	for name, file := range certs {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := pki.ParseCertificate(data)
		if err != nil {
			t.Fatalf("%s's certificate: %v", name, err)
		}
		if cert.NotAfter.After(last) {
			last = cert.NotAfter
		}
	}
	time.Sleep(time.Until(last) + time.Second)
	t.Logf("m1 and r1 were off %s; the last of the three certificates expired at %s", time.Since(off).Round(time.Second), last.Format(time.TimeOnly))

	// m1: its data directory alone (and the validity every member keeps
	// in its unit: the certificates it signs last it).
	restart := time.Now()
	m1 := members[0]
	p, ready := spawnServer(t, []string{"--listen", m1.ts.proc.hostPort(), "--data-dir", m1.dataDir, "--log-level", "info",
		"--cluster-cert-validity", rejoinValidity}, nil)
	if !ready {
		t.Fatalf("m1 exited with code %d before it was ready; log:\n%s", p.code, p.log.String())
	}
	m1.ts = &testServer{URL: "http://" + p.hostPort(), DataDir: m1.dataDir, Kubeconfig: filepath.Join(m1.dataDir, "kubeconfig"), proc: p}
	t.Logf("m1 was ready %s after its start with an expired certificate", time.Since(restart).Round(time.Millisecond))
	m1log := members[0].ts.Log()
	for _, want := range []string{"The certificate expired while the device was off", "Renewed the expired certificate; starting"} {
		i := strings.Index(m1log, want)
		if i < 0 {
			t.Errorf("m1's log does not say %q", want)
			continue
		}
		line, _, _ := strings.Cut(m1log[i:], "\n")
		t.Logf("m1: %s", line)
	}
	members[0].waitHealthy(t, 3)
	for _, name := range []string{"before", "while-off"} {
		if _, err := leases(members[0].ts).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Lease %s through m1 after its return: %v", name, err)
		}
	}

	// r1 with the token it was given before the rotation: refused, saying
	// what to pass; with the current one, back.
	p, ready = spawnServer(t, []string{"--listen", r1.ts.proc.hostPort(), "--data-dir", r1.dataDir, "--cluster-token", "e2e-cluster-token"}, nil)
	if ready {
		t.Fatal("r1 started with the token from before the rotation")
	}
	if log := p.log.String(); !strings.Contains(log, "not the cluster's current one") || !strings.Contains(log, "--cluster-token-file") {
		t.Errorf("r1's refusal with an old token does not say to pass the current one:\n%s", log)
	}
	restart = time.Now()
	r1 = startRejoinReplica(t, "r1", r1.dataDir, r1.ts.proc.hostPort(), "--cluster-token-file", token)
	t.Logf("r1 was ready %s after its start with an expired certificate", time.Since(restart).Round(time.Millisecond))
	for _, name := range []string{"before", "while-off"} {
		if _, err := leases(r1.ts).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Lease %s through r1 after its return: %v", name, err)
		}
	}
	// Both write, and renew their certificates on their own schedule.
	for _, ts := range []*testServer{members[0].ts, r1.ts} {
		lease, err := leases(ts).Get(ctx, "while-off", metav1.GetOptions{})
		if err == nil {
			now := metav1.NewMicroTime(time.Now())
			lease.Spec.RenewTime = &now
			_, err = leases(ts).Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("renew a Lease through a device back after its certificate expired: %v", err)
		}
	}
	eventually(t, 40*time.Second, "m1 and r1 renew their certificates again by themselves", func() (bool, string) {
		m, r := strings.Count(members[0].ts.Log(), "Renewed the member's certificate"), strings.Count(r1.ts.Log(), "Renewed the replica's certificate")
		return m >= 1 && r >= 1, fmt.Sprintf("m1 %d, r1 %d", m, r)
	})

	// The revoked r2 does not come back, even with the current token.
	p, ready = spawnServer(t, []string{"--listen", "127.0.0.1:0", "--data-dir", r2.dataDir, "--cluster-token-file", token}, nil)
	if ready {
		t.Fatal("the revoked r2 came back")
	}
	if log := p.log.String(); !strings.Contains(log, "does not admit this certificate") || !strings.Contains(log, "join again") {
		t.Errorf("r2's refusal does not say it was revoked and must join again:\n%s", log)
	}
}

// rejoinReplica is a replica of the rejoin test.
type rejoinReplica struct {
	dataDir string
	ts      *testServer
}

// startRejoinReplica starts the replica called name in dataDir, listening
// on listen, with args (the join's flags the first time).
func startRejoinReplica(t *testing.T, name, dataDir, listen string, args ...string) *rejoinReplica {
	t.Helper()
	argv := append([]string{"--listen", listen, "--data-dir", dataDir, "--log-level", "info", "--member-name", name}, args...)
	p, ready := spawnServer(t, argv, nil)
	if !ready {
		t.Fatalf("replica %s exited with code %d before it was ready; log:\n%s", name, p.code, p.log.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica %s log:\n%s", name, p.log.String())
		}
	})
	return &rejoinReplica{dataDir: dataDir, ts: &testServer{URL: "http://" + p.hostPort(), DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), proc: p}}
}
