package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// TestClusterQuorumLossReset: of three members, two are destroyed (kill -9,
// data directories removed) while a writer renews a lease through the
// third; the survivor, killed too, recovers with "leasehold cluster
// reset" and "serve --cluster-init" as a one-member cluster holding every
// write it acknowledged; a destroyed member's certificate no longer passes
// its TLS handshake (fenced); a device with an emptied data directory
// joins the new cluster with the new token.
func TestClusterQuorumLossReset(t *testing.T) {
	testneeds.Slow(t, "starts embedded etcd members, destroys two and recovers the third")
	t.Parallel() // waits on the cluster members it starts
	ctx := context.Background()
	members := startCluster(t)
	survivor := members[0]
	cs := clientset(t, restConfig(t, survivor.ts, wireProtobuf))
	createLeases(t, cs, "default", "before-loss", 50)
	want, _ := holders(t, cs, "default")

	// A writer renews "probe" through the survivor until the end: every
	// renewal it acknowledged must be in the recovered cluster.
	leases := cs.CoordinationV1().Leases("default")
	cur, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("renewal-000000")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var acked atomic.Int64
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			next := cur.DeepCopy()
			next.Spec.HolderIdentity = ptrTo(fmt.Sprintf("renewal-%06d", i))
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := leases.Update(wctx, next, metav1.UpdateOptions{})
			cancel()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				if l, err = leases.Get(ctx, "probe", metav1.GetOptions{}); err == nil {
					cur = l
				}
				continue
			}
			cur = l
			acked.Store(i)
		}
	})
	eventually(t, 20*time.Second, "renewals through the survivor", func() (bool, string) {
		return acked.Load() >= 20, fmt.Sprintf("%d acknowledged", acked.Load())
	})

	// The loss: two devices destroyed, then the survivor's process dies
	// too (a power cut); a copy of a lost member's certificate stays, as
	// a thief's would.
	lost := members[1]
	stolen := t.TempDir()
	for _, f := range []string{"ca.crt", "member.crt", "member.key"} {
		data, err := os.ReadFile(filepath.Join(lost.dataDir, "cluster", "pki", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stolen, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members[1:] {
		m.ts.proc.kill()
		if err := os.RemoveAll(m.dataDir); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // renewals now fail: no quorum
	survivor.ts.proc.kill()
	close(stop)
	writer.Wait()
	last := acked.Load()
	lostAt := time.Now()

	code, out, errOut := runCLI(t, "cluster", "reset", "--data-dir", survivor.dataDir)
	resetTook := time.Since(lostAt)
	if code != 0 || !strings.HasPrefix(out, "reset member m1: ") || !strings.Contains(out, "next: leasehold serve --cluster-init") {
		t.Fatalf("leasehold cluster reset: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var peer, client string
	for i, a := range survivor.args {
		switch a {
		case "--peer-listen":
			peer = survivor.args[i+1]
		case "--cluster-client-listen":
			client = survivor.args[i+1]
		}
	}
	if !strings.Contains(out, "--member-name m1 --peer-listen "+peer+" --cluster-client-listen "+client) {
		t.Errorf("cluster reset's next step does not give the member's name and addresses (%s, %s):\n%s", peer, client, out)
	}
	restarted := time.Now()
	r1 := startMemberIn(t, "m1", survivor.dataDir, "--cluster-init", "--cluster-token", "e2e-cluster-token-after-reset",
		"--member-name", "m1", "--peer-listen", peer, "--cluster-client-listen", client)
	serveTook := time.Since(restarted)
	rcs := clientset(t, restConfig(t, r1.ts, wireProtobuf))
	got, _ := holders(t, rcs, "default")
	for name, holder := range want {
		if got[name] != holder {
			t.Errorf("lease %s after the reset: holder %q, want %q (acknowledged before the loss)", name, got[name], holder)
		}
	}
	n, err := strconv.Atoi(strings.TrimPrefix(got["probe"], "renewal-"))
	if err != nil || int64(n) < last {
		t.Errorf("probe after the reset: holder %q, want renewal %d (the last acknowledged) or later", got["probe"], last)
	}
	t.Logf("MEASURED: recovery from a lost quorum: cluster reset %v, serve --cluster-init ready %v later, %v in all; %d renewals acknowledged before the loss, the recovered member holds %q",
		resetTook.Round(time.Millisecond), serveTook.Round(time.Millisecond), time.Since(lostAt).Round(time.Millisecond), last, got["probe"])

	// Fenced: the lost member's certificate is of the old CA, while the
	// recovered member's own passes.
	if err := handshake(filepath.Join(survivor.dataDir, "cluster", "pki"), client); err != nil {
		t.Fatalf("the recovered member's own certificate fails the handshake of its client port: %v", err)
	}
	if err := handshake(stolen, client); err == nil {
		t.Errorf("a lost member's certificate passes the TLS handshake of the recovered member's client port %s", client)
	}
	if err := handshake(stolen, peer); err == nil {
		t.Errorf("a lost member's certificate passes the TLS handshake of the recovered member's peer port %s", peer)
	}

	// A device with an emptied data directory joins with the new token.
	ports := freeLoopbackPorts(t, 2)
	startMemberIn(t, "m2", t.TempDir(), "--join", r1.ts.URL, "--cluster-token", "e2e-cluster-token-after-reset", "--member-name", "m2",
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	st := r1.waitHealthy(t, 2)
	var names []string
	for _, m := range st.Members {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "m1,m2" {
		t.Errorf("the recovered cluster's members: %v, want m1 (recovered) and m2 (joined afresh)", names)
	}
}

// handshake runs a TLS handshake with addr presenting the certificate
// and key in dir (a member's pki files), trusting any server as a thief
// would: it fails only when the server refuses the certificate.
func handshake(dir, addr string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "member.crt"), filepath.Join(dir, "member.key"))
	if err != nil {
		return err
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
	if err != nil {
		return err
	}
	defer conn.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return err
	}
	return nil
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
