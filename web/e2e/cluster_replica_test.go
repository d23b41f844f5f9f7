package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// startClusterReplica runs "leasehold serve --join URL --cluster-token T
// --replica" (or, with no join URL, a restart on the data directory alone)
// and returns it as a test server on a fixed listen address.
func startClusterReplica(t *testing.T, dataDir, listen, joinURL string) *testServer {
	t.Helper()
	args := []string{"--listen", listen, "--data-dir", dataDir, "--log-level", "info"}
	if joinURL != "" {
		args = append(args, "--join", joinURL, "--cluster-token", "e2e-cluster-token", "--replica", "--member-name", "r1")
	}
	p, ready := spawnServer(t, args, nil)
	if !ready {
		t.Fatalf("replica exited with code %d before it was ready; log:\n%s", p.code, p.log.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica log:\n%s", p.log.String())
		}
	})
	return &testServer{URL: "http://" + p.hostPort(), DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), proc: p}
}

// TestClusterReplicaAndOperators runs three members and one API-only
// replica made with one command (--join --cluster-token --replica):
// client-go writes through the replica are read through a member, the
// replica's watch sees a member's writes, and the replica restarts with
// its data directory alone. The operators' view: the members' system page
// in Chromium lists them (etcd leader, health, this member, the election
// controller), every log line at info is labelled, and "cluster remove"
// without a quorum fails within seconds saying what to do.
func TestClusterReplicaAndOperators(t *testing.T) {
	testneeds.Slow(t, "a three-member embedded etcd cluster and a replica")
	t.Parallel()
	members := startCluster(t)
	ctx := context.Background()

	// One command makes a replica: the handshake through m1 hands it a
	// client certificate and the members' client URLs.
	replicaDir := t.TempDir()
	listen := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPorts(t, 1)[0])
	replica := startClusterReplica(t, replicaDir, listen, members[0].ts.URL)
	for _, f := range []string{"replica.json", "ca.crt", "client.crt", "client.key"} {
		if _, err := os.Stat(filepath.Join(replicaDir, "replica", f)); err != nil {
			t.Errorf("the replica's data directory lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(replicaDir, "replica", "ca.key")); err == nil {
		t.Error("the replica was given the cluster CA's key: a replica admits nobody")
	}
	viaReplica := clientset(t, restConfig(t, replica, wireProtobuf)).CoordinationV1().Leases("default")
	viaMember := clientset(t, restConfig(t, members[1].ts, wireProtobuf)).CoordinationV1().Leases("default")
	viaOther := clientset(t, restConfig(t, members[2].ts, wireJSON)).CoordinationV1().Leases("default")

	holder := "written-through-the-replica"
	created, err := viaReplica.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "replicated"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through the replica: %v", err)
	}
	got, err := viaMember.Get(ctx, "replicated", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read through member m2: %v", err)
	}
	if got.ResourceVersion != created.ResourceVersion || *got.Spec.HolderIdentity != holder {
		t.Errorf("m2 read rv %s holder %q, want rv %s holder %q", got.ResourceVersion, *got.Spec.HolderIdentity, created.ResourceVersion, holder)
	}

	// The replica's watch sees a write made through member m3.
	w, err := viaReplica.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatalf("watch through the replica: %v", err)
	}
	defer w.Stop()
	moved := "written-through-m3"
	got.Spec.HolderIdentity = &moved
	updated, err := viaOther.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update through m3: %v", err)
	}
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the replica's watch ended before the member's write")
		}
		l, isLease := ev.Object.(*coordinationv1.Lease)
		if ev.Type != watch.Modified || !isLease || *l.Spec.HolderIdentity != moved || l.ResourceVersion != updated.ResourceVersion {
			t.Errorf("replica watch event %s %+v, want MODIFIED holder %q rv %s", ev.Type, ev.Object, moved, updated.ResourceVersion)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the replica's watch did not see the write through m3 within 20s")
	}
	w.Stop()

	// A restart needs the data directory alone.
	replica.proc.kill()
	replica = startClusterReplica(t, replicaDir, listen, "")
	if !strings.Contains(replica.Log(), "Restarting the replica from its data") {
		t.Errorf("the restarted replica did not say it restarted from its data:\n%s", replica.Log())
	}
	if got, err := viaReplica.Get(ctx, "replicated", metav1.GetOptions{}); err != nil || *got.Spec.HolderIdentity != moved {
		t.Errorf("read through the restarted replica: %v, %+v", err, got)
	}

	// The status names the server running the election controller: one
	// of the members or the replica, all of which campaign on one etcd.
	var st clusterStatusWithController
	eventually(t, 20*time.Second, "the status names the election controller", func() (bool, string) {
		code, out, errOut := runCLI(t, "cluster", "status", "-o", "json", "--timeout", "5s", "--kubeconfig", members[0].ts.Kubeconfig)
		if code != 0 {
			return false, errOut
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, err.Error()
		}
		return regexp.MustCompile(`^(m[123]|r1)$`).MatchString(st.ElectionController), out
	})

	checkClusterSystemPage(t, members[0])

	// Every line the members and the replica logged at info is slog's,
	// etcd's labelled: no zap or gRPC output of its own, no component
	// given twice.
	for name, log := range map[string]string{"m1": members[0].ts.Log(), "m2": members[1].ts.Log(), "m3": members[2].ts.Log(), "r1": replica.Log()} {
		checkLabelledLog(t, name, log)
	}

	// Quorum lost: with two of three members dead, a removal fails within
	// seconds with what to do, and the status still answers.
	for _, m := range members[1:] {
		m.ts.proc.kill()
	}
	eventually(t, 30*time.Second, "m1 notices it has no quorum", func() (bool, string) {
		st, err := members[0].status(t)
		return err == nil && st.Leader == "", fmt.Sprintf("%+v %v", st, err)
	})
	start := time.Now()
	code, _, errOut := runCLI(t, "cluster", "remove", "m3", "--timeout", "60s", "--kubeconfig", members[0].ts.Kubeconfig)
	took := time.Since(start)
	t.Logf("MEASURED: cluster remove without a quorum failed in %v: %s", took.Round(time.Millisecond), strings.TrimSpace(errOut))
	if code == 0 {
		t.Fatal("cluster remove without a quorum succeeded")
	}
	for _, want := range []string{"no quorum", "1 of 3 voting members are reachable", "quorum needs 2", "Start enough of the stopped members"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("cluster remove without a quorum said %q, want it to contain %q", errOut, want)
		}
	}
	// The member bounds the removal at 5s (plus the reachability probe);
	// the margin is for a loaded machine.
	if took > 20*time.Second {
		t.Errorf("cluster remove without a quorum took %v, want a bounded few seconds", took)
	}
	checkLabelledLog(t, "m1 after the quorum loss", members[0].ts.Log())
}

// clusterStatusWithController is the part of "cluster status -o json"
// that names the election controller.
type clusterStatusWithController struct {
	Self               string `json:"self"`
	ElectionController string `json:"electionController"`
}

// slogLine is one line of slog's text handler.
var slogLine = regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR) msg=`)

// checkLabelledLog fails for a line that is not slog's (zap's JSON, gRPC's
// own format, a bare panic), for a component given twice, and for a line
// of the embedded etcd that says neither component=etcd nor "etcd
// client".
func checkLabelledLog(t *testing.T, name, log string) {
	t.Helper()
	for line := range strings.Lines(log) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		if !slogLine.MatchString(line) {
			t.Errorf("%s logged an unlabelled line: %q", name, line)
			continue
		}
		if strings.Count(line, " component=") > 1 {
			t.Errorf("%s logged a line with two components: %q", name, line)
		}
		// etcd's messages carry its member IDs or raft terms: such a line
		// must be labelled as etcd's.
		if (strings.Contains(line, "local-member-id=") || strings.Contains(line, "raft")) &&
			!strings.Contains(line, "component=etcd") && !strings.Contains(line, `msg="etcd client: `) {
			t.Errorf("%s logged an etcd line without its label: %q", name, line)
		}
	}
}

// checkClusterSystemPage opens member m's system page in Chromium and
// checks the cluster section: every member with its etcd leader, health,
// role, raft index and peer URL, this member, and the election controller.
func checkClusterSystemPage(t *testing.T, m *clusterMember) {
	t.Helper()
	chromium := testneeds.Chromium(t)
	ctx, closeBrowser := openBrowser(t, chromium, 60*time.Second)
	defer closeBrowser()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(m.ts.URL+"/ui/#/system")); err != nil {
		t.Fatalf("open the system page: %v", err)
	}
	var page string
	eventually(t, 30*time.Second, "the system page lists three healthy members", func() (bool, string) {
		var err error
		page, err = chromedp.Run(ctx, chromedp.Evaluate[string](
			`(document.getElementById('cluster') || {}).innerText + '\n' + (document.getElementById('system') || {}).innerText`))
		if err != nil {
			return false, err.Error()
		}
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#members tbody tr').length`))
		return err == nil && rows == 3 && strings.Count(page, "healthy") >= 3 && !strings.Contains(page, "unhealthy"), page
	})
	for _, want := range []string{"Cluster", "m1 (this member)", "m2", "m3", "leader", "voter", "https://127.0.0.1:",
		"Healthy voting members\n3 of 3 (quorum 2)", "cluster member m1 (embedded etcd)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the system page lacks %q:\n%s", want, page)
		}
	}
	// The controller may move while the page loads (the replica was just
	// restarted): any member or the replica will do, but someone.
	if !regexp.MustCompile(`Election controller\n(m[123]|r1)\b`).MatchString(page) {
		t.Errorf("the system page names no election controller:\n%s", page)
	}
}

// openBrowser starts a headless Chromium (at chromium, testneeds.Chromium)
// with a profile of its own and returns a tab's context, bounded by
// timeout; closeBrowser ends the tab and the browser.
func openBrowser(t *testing.T, chromium string, timeout time.Duration) (ctx context.Context, closeBrowser func()) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, timeout)
	return ctx, func() {
		cancel()
		cancelBrowser()
		cancelAlloc()
	}
}
