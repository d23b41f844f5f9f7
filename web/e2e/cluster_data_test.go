package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// createLeases creates n leases named prefix-NNNN in namespace ns, with
// holder "holder-NNNN", 16 at a time. A create the server answers with a
// timeout (a cluster member's storage request outlived
// --cluster-request-timeout: on a machine where processes stall for
// seconds) or "unavailable" is sent again, as a client would; its outcome
// was unknown, so "already exists" then means it had succeeded.
func createLeases(t *testing.T, cs *kubernetes.Clientset, ns, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", prefix, i)},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo(fmt.Sprintf("holder-%04d", i)), LeaseDurationSeconds: ptrTo[int32](3600)}}
				if err := createRetrying(ctx, cs, ns, l); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create lease: %v", err)
	}
}

// createRetrying creates l, sending it again (for up to a minute) while
// the server answers that it timed out or is unavailable.
func createRetrying(ctx context.Context, cs *kubernetes.Clientset, ns string, l *coordinationv1.Lease) error {
	end := time.Now().Add(time.Minute)
	for retried := false; ; retried = true {
		_, err := cs.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
		switch {
		case err == nil:
			return nil
		case retried && apierrors.IsAlreadyExists(err):
			return nil // the timed-out create had succeeded
		case !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsServiceUnavailable(err):
			return err
		case time.Now().After(end):
			return fmt.Errorf("%s: still %w after a minute of retries", l.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// holders maps lease name to holder for namespace ns.
func holders(t *testing.T, cs *kubernetes.Clientset, ns string) (map[string]string, string) {
	t.Helper()
	list, err := cs.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list leases in %s: %v", ns, err)
	}
	out := map[string]string{}
	for _, l := range list.Items {
		out[l.Name] = derefString(l.Spec.HolderIdentity)
	}
	return out, list.ResourceVersion
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// startMemberIn runs "serve" with cluster flags on dataDir and returns it
// as a cluster member, killed when the test ends (as startCluster's are).
func startMemberIn(t *testing.T, name, dataDir string, args ...string) *clusterMember {
	t.Helper()
	m := &clusterMember{name: name, dataDir: dataDir, args: args}
	m.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("member %s log:\n%s", m.name, m.ts.Log())
		}
	})
	return m
}

// backupRevision is the revision "leasehold backup" prints.
var backupRevision = regexp.MustCompile(`^wrote \S+ \(\d+ bytes, revision (\d+), `)

var importTook = regexp.MustCompile(`Imported the single-device database.*took=(\S+)`)

// TestClusterImportFromSingleDevice: --cluster-init on the data directory
// of a single-device server imports its leases and candidates once; the
// old file is kept; resourceVersions move past the old ones, and a watch
// from an old one ends with 410 so that the client relists.
func TestClusterImportFromSingleDevice(t *testing.T) {
	testneeds.Slow(t, "starts embedded etcd members and restarts them")
	t.Parallel() // waits on the cluster members it starts
	ctx := context.Background()
	begin := time.Now()
	dir := t.TempDir()
	single := startServerIn(t, dir)
	cs := clientset(t, restConfig(t, single, wireProtobuf))
	const n = 1000
	createLeases(t, cs, "default", "lease", n)
	cand := &coordinationv1beta1.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{Name: "c1"},
		Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: "coordinated", RenewTime: nowMicro(),
			BinaryVersion: "1.37.0", EmulationVersion: "1.37.0", Strategy: coordinationv1.OldestEmulationVersion}}
	if _, err := cs.CoordinationV1beta1().LeaseCandidates("apps").Create(ctx, cand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, oldRV := holders(t, cs, "default")
	single.Stop(t)
	t.Logf("%s: single device written and stopped", time.Since(begin).Round(time.Millisecond))

	ports := freeLoopbackPorts(t, 2)
	m := startMemberIn(t, "m1", dir, "--cluster-init", "--cluster-token", "import-token-0123", "--member-name", "m1",
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	if match := importTook.FindStringSubmatch(m.ts.Log()); match == nil {
		t.Errorf("no import in the log:\n%s", m.ts.Log())
	} else {
		t.Logf("import of %d leases, a candidate and their namespaces took %s", n, match[1])
	}
	if _, err := os.Stat(filepath.Join(dir, "leasehold.db.pre-cluster")); err != nil {
		t.Errorf("the kept single-device database: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "leasehold.db")); !os.IsNotExist(err) {
		t.Errorf("leasehold.db is still in place (%v)", err)
	}

	cs = clientset(t, restConfig(t, m.ts, wireProtobuf))
	after, newRV := holders(t, cs, "default")
	if len(after) != n || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the cluster holds %d leases (want %d, the same holders)", len(after), n)
	}
	if !rvLess(t, oldRV, newRV) {
		t.Errorf("resourceVersion after the import %s, want above the single device's %s", newRV, oldRV)
	}
	if _, err := cs.CoordinationV1beta1().LeaseCandidates("apps").Get(ctx, "c1", metav1.GetOptions{}); err != nil {
		t.Errorf("the candidate after the import: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "apps", metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace after the import: %v", err)
	}
	w, err := cs.CoordinationV1().Leases("default").Watch(ctx, metav1.ListOptions{ResourceVersion: oldRV})
	if err != nil {
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("a watch from the old resourceVersion: %v, want 410", err)
		}
	} else {
		select {
		case ev := <-w.ResultChan():
			if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || st.Code != 410 {
				t.Errorf("a watch from the old resourceVersion got %s %+v, want a 410 error", ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("a watch from the old resourceVersion got nothing in 10s, want a 410 error")
		}
		w.Stop()
	}

	t.Logf("%s: imported and checked", time.Since(begin).Round(time.Millisecond))

	// A restart imports nothing again.
	m.ts.Stop(t)
	m.start(t)
	t.Cleanup(func() { m.ts.Stop(t) }) // before the process is killed

	if strings.Contains(m.ts.Log(), "Imported the single-device database") {
		t.Errorf("the restart imported again:\n%s", m.ts.Log())
	}
	cs = clientset(t, restConfig(t, m.ts, wireProtobuf))
	if again, _ := holders(t, cs, "default"); len(again) != n {
		t.Errorf("after the restart: %d leases, want %d", len(again), n)
	}
	var st struct {
		Import struct {
			Done    bool `json:"done"`
			Records int  `json:"records"`
		} `json:"import"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "cluster", "member.json"))
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	t.Logf("%s: restarted", time.Since(begin).Round(time.Millisecond))
	if err != nil || !st.Import.Done || st.Import.Records < n+1 {
		t.Errorf("member.json's import: %+v, %v; want done with %d records or more", st.Import, err, n+1)
	}
}

// TestClusterBackupRestore: a follower's "leasehold backup" of a running
// 3-member cluster restores, on one device, a new cluster with the data of
// the snapshot and nothing later; a fresh device joins it with an emptied
// data directory, and the restored cluster holds those two members only.
func TestClusterBackupRestore(t *testing.T) {
	testneeds.Slow(t, "starts embedded etcd members and restarts them")
	t.Parallel() // waits on the cluster members it starts
	ctx := context.Background()
	begin := time.Now()
	members := startCluster(t)
	cs := clientset(t, restConfig(t, members[0].ts, wireProtobuf))
	createLeases(t, cs, "default", "kept", 50)
	cs2 := clientset(t, restConfig(t, members[1].ts, wireProtobuf))
	l, err := cs2.CoordinationV1().Leases("default").Get(ctx, "kept-0007", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptrTo("moved-through-m2")
	if _, err := cs2.CoordinationV1().Leases("default").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want, listRV := holders(t, cs2, "default")

	st := members[2].waitHealthy(t, 3)
	var follower *clusterMember
	for _, m := range members {
		if m.name != st.Leader {
			follower = m
		}
	}
	snap := filepath.Join(t.TempDir(), "cluster.snapshot")
	code, out, errOut := runCLI(t, "backup", "--data-dir", follower.dataDir, snap)
	m := backupRevision.FindStringSubmatch(out)
	if code != 0 || !strings.HasPrefix(out, "wrote "+snap) || m == nil {
		t.Fatalf("leasehold backup on follower %s: exit %d, stdout %q, stderr %q", follower.name, code, out, errOut)
	}
	// The backup holds every acknowledged write: its revision is at least
	// that of the list (a linearizable read) made after the last one.
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	if listed, _ := strconv.ParseInt(listRV, 10, 64); rev < listed {
		t.Errorf("the backup's revision %s is below %s, the list's after the last write", m[1], listRV)
	}
	createLeases(t, cs, "default", "later", 1)
	// The old cluster is lost (the restore does not need it stopped
	// gracefully, only not running).
	for _, m := range members {
		m.ts.proc.kill()
	}
	t.Logf("%s: cluster up, written, backed up", time.Since(begin).Round(time.Millisecond))

	// Restore on m1's device, over its old member, on its ports.
	code, out, errOut = runCLI(t, "restore", "--data-dir", members[0].dataDir, snap)
	if code != 0 || !strings.Contains(out, "staged ") || !strings.Contains(out, "cluster.pre-restore-") {
		t.Fatalf("leasehold restore: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	r1Args := []string{"--cluster-init", "--cluster-token", "restored-token-0123", "--member-name", "m1"}
	for i, a := range members[0].args {
		if a == "--peer-listen" || a == "--cluster-client-listen" {
			r1Args = append(r1Args, a, members[0].args[i+1])
		}
	}
	r1 := startMemberIn(t, "r1", members[0].dataDir, r1Args...)
	if !strings.Contains(r1.ts.Log(), "Restored a new cluster from the snapshot") {
		t.Errorf("no restore in the log:\n%s", r1.ts.Log())
	}
	rcs := clientset(t, restConfig(t, r1.ts, wireProtobuf))
	got, _ := holders(t, rcs, "default")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("restored leases:\n%v\nwant (as at the backup)\n%v", got, want)
	}

	t.Logf("%s: restored", time.Since(begin).Round(time.Millisecond))

	// A device with an emptied data directory joins the restored cluster.
	ports := freeLoopbackPorts(t, 2)
	startMemberIn(t, "n2", t.TempDir(), "--join", r1.ts.URL, "--cluster-token", "restored-token-0123", "--member-name", "n2",
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--cluster-client-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	status := r1.waitHealthy(t, 2)
	t.Logf("%s: joined", time.Since(begin).Round(time.Millisecond))
	var names []string
	for _, m := range status.Members {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "m1,n2" {
		t.Errorf("the restored cluster's members: %v, want m1 (restored) and n2", names)
	}
}
