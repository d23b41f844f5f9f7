package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/internal/testneeds"
)

// The upgrade tests run the previous release (docs/releases.txt names its
// commit; it is built from this clone's git history) and the tree under
// test on the same data: a single device's directory, and a cluster
// upgraded member by member under load and one member downgraded again.

// previousRelease is the newest release in docs/releases.txt other than
// the one VERSION works toward, built once per test process.
var previousRelease = sync.OnceValues(func() (release, error) {
	root, err := moduleRoot()
	if err != nil {
		return release{}, err
	}
	rel, err := newestRelease(root)
	if err != nil {
		return release{}, err
	}
	rel.bin, err = buildRelease(root, rel)
	return rel, err
})

// release is one line of docs/releases.txt and, once built, its binary.
type release struct {
	version, commit string
	bin             string
}

func newestRelease(root string) (release, error) {
	current, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return release{}, err
	}
	f, err := os.Open(filepath.Join(root, "docs", "releases.txt"))
	if err != nil {
		return release{}, err
	}
	defer f.Close()
	var newest release
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || fields[0] == strings.TrimSpace(string(current)) {
			continue
		}
		newest = release{version: fields[0], commit: fields[1]} // oldest first: the last wins
	}
	if err := sc.Err(); err != nil {
		return release{}, err
	}
	if newest.commit == "" {
		return release{}, fmt.Errorf("docs/releases.txt names no release before %s", strings.TrimSpace(string(current)))
	}
	return newest, nil
}

// buildRelease builds rel's binary from its commit, unpacked from git (no
// checkout is touched), into the user's cache: a later run reuses it.
func buildRelease(root string, rel release) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "leasehold-e2e", rel.version+"-"+rel.commit)
	bin := filepath.Join(dir, "leasehold")
	if st, err := os.Stat(bin); err == nil && st.Mode()&0o111 != 0 {
		return bin, nil
	}
	if err := exec.Command("git", "-C", root, "cat-file", "-e", rel.commit+"^{commit}").Run(); err != nil {
		// A shallow clone lacks it: fetch that one commit where the
		// clone came from.
		if out, err := exec.Command("git", "-C", root, "fetch", "--no-tags", "--depth=1", "origin", rel.commit).CombinedOutput(); err != nil {
			return "", &testneeds.Missing{What: "the git history of release " + rel.version + " (commit " + rel.commit + ")",
				Hint: "the upgrade tests build it from git: clone without --depth, or git fetch origin " + rel.commit + ": " + strings.TrimSpace(string(out))}
		}
	}
	src, err := os.MkdirTemp("", "leasehold-release-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, rel.commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("unpack release %s (%s): %v\n%s", rel.version, rel.commit, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Not -trimpath: the build then shares the compiled dependencies
	// with the tests' own build in the Go build cache.
	tmp := bin + ".tmp"
	build := exec.Command("go", "build", "-o", tmp, "-ldflags", "-X main.Version="+rel.version, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build release %s (%s): %v\n%s", rel.version, rel.commit, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// prevRelease returns the previous release's binary, or fails the test
// with what is missing.
func prevRelease(t *testing.T) release {
	t.Helper()
	rel, err := previousRelease()
	testneeds.Check(t, err)
	if err != nil {
		t.Fatalf("the previous release: %v", err)
	}
	return rel
}

// TestUpgradeSingleDevice serves a data directory with the previous
// release, then with the tree under test (leases, a candidate and a
// namespace as they were, writes go on from the same resourceVersions),
// then with the previous release again: a downgrade within one data
// directory layout keeps everything, and across layouts is refused with
// the reason.
func TestUpgradeSingleDevice(t *testing.T) {
	testneeds.Slow(t, "builds the previous release from git")
	t.Parallel()
	rel := prevRelease(t)
	dir := t.TempDir()
	ctx := context.Background()

	old := serveBinary(t, rel.bin, dir)
	cs := clientset(t, restConfig(t, old, wireProtobuf))
	holder, dur := "device-a", int32(15)
	renew := metav1.NewMicroTime(time.Now())
	lease, err := cs.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-probe", Labels: map[string]string{"app": "upgrade"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &renew},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a lease on %s: %v", rel.version, err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a namespace on %s: %v", rel.version, err)
	}
	old.Stop(t)
	oldLayout := readLayoutVersion(t, dir)

	head := startServerIn(t, dir)
	cs = clientset(t, restConfig(t, head, wireProtobuf))
	got, err := cs.CoordinationV1().Leases("default").Get(ctx, "upgrade-probe", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lease %s wrote, read by the tree under test: %v", rel.version, err)
	}
	if got.ResourceVersion != lease.ResourceVersion || deref(got.Spec.HolderIdentity) != holder || !got.Spec.RenewTime.Equal(lease.Spec.RenewTime) || got.Labels["app"] != "upgrade" {
		t.Errorf("after the upgrade the lease holds %q renewed %v, labels %v (rv %s), want %s's %q renewed %v, labels %v (rv %s)",
			deref(got.Spec.HolderIdentity), got.Spec.RenewTime, got.Labels, got.ResourceVersion,
			rel.version, deref(lease.Spec.HolderIdentity), lease.Spec.RenewTime, lease.Labels, lease.ResourceVersion)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "upgrade-ns", metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace %s created, after the upgrade: %v", rel.version, err)
	}
	holder = "device-b"
	got.Spec.HolderIdentity = &holder
	updated, err := cs.CoordinationV1().Leases("default").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update the lease after the upgrade: %v", err)
	}
	if !rvLess(t, lease.ResourceVersion, updated.ResourceVersion) {
		t.Errorf("resourceVersion went from %s to %s across the upgrade, want it to grow", lease.ResourceVersion, updated.ResourceVersion)
	}
	head.Stop(t)
	newLayout := readLayoutVersion(t, dir)
	t.Logf("data directory layout: %s wrote %d, the tree under test %d (binary's %d)", rel.version, oldLayout, newLayout, datadir.Version)

	if newLayout > oldLayout {
		// A newer layout: the previous release must refuse it, not
		// misread it.
		p, ready := spawnBinary(t, rel.bin, nil, []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, nil)
		if ready {
			t.Fatalf("%s served a data directory of layout %d, newer than its own %d", rel.version, newLayout, oldLayout)
		}
		if !strings.Contains(p.log.String(), "newer") {
			t.Errorf("%s refused a newer data directory without saying so:\n%s", rel.version, p.log.String())
		}
		return
	}
	back := serveBinary(t, rel.bin, dir)
	got, err = clientset(t, restConfig(t, back, wireJSON)).CoordinationV1().Leases("default").Get(ctx, "upgrade-probe", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lease after downgrading to %s: %v", rel.version, err)
	}
	if got.ResourceVersion != updated.ResourceVersion || *got.Spec.HolderIdentity != "device-b" {
		t.Errorf("after the downgrade the lease holds %q at rv %s, want device-b at rv %s", *got.Spec.HolderIdentity, got.ResourceVersion, updated.ResourceVersion)
	}
	back.Stop(t)
}

// serveBinary runs bin as a single device on dataDir.
func serveBinary(t *testing.T, bin, dataDir string) *testServer {
	t.Helper()
	p, ready := spawnBinary(t, bin, nil, []string{"--listen", "127.0.0.1:0", "--data-dir", dataDir}, nil)
	if !ready {
		t.Fatalf("%s exited with code %d before it was ready; log:\n%s", bin, p.code, p.log.String())
	}
	return &testServer{URL: "http://" + p.hostPort(), DataDir: dataDir, Kubeconfig: filepath.Join(dataDir, "kubeconfig"), proc: p}
}

// readLayoutVersion is the data directory layout version recorded in dir.
func readLayoutVersion(t *testing.T, dir string) int {
	t.Helper()
	_, v, err := datadir.Inspect(dir)
	if err != nil {
		t.Fatalf("inspect %s: %v", dir, err)
	}
	return v
}

// TestClusterRollingUpgrade starts a three-member cluster on the previous
// release, with a client-go elector and a linearizability-recorded
// renewal writer on every member, replaces the members one by one with
// the tree under test (stop, start the new binary on the same data
// directory), then downgrades one member back: no acknowledged write is
// lost (porcupine), never two electors lead at once, and every member
// serves renewals again after its restart.
func TestClusterRollingUpgrade(t *testing.T) {
	testneeds.Slow(t, "a three-member cluster upgraded member by member")
	t.Parallel()
	rel := prevRelease(t)
	ctx := context.Background()
	c := &faultCluster{t: t, ctx: ctx, lt: &leaderTracker{leading: map[string]bool{}}, measured: map[string][]time.Duration{}}
	c.members = startClusterOf(t, nil, rel.bin)
	c.members[0].waitHealthy(t, 3)
	c.electors = make([]*faultElector, len(c.members))
	for i, m := range c.members {
		c.electors[i] = c.startFaultElector(m)
	}
	waitLeader(t, c.lt, 1, 20*time.Second)

	hist := &leaseHistory{lease: "upgrade-probe"}
	init := "init"
	if _, err := c.leases(c.members[0], wireProtobuf).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: hist.name()},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &init}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the probe lease: %v", err)
	}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for i, m := range c.members {
		leases := c.leases(m, wireProtobuf)
		writers.Go(func() { hist.renew(ctx, i, leases, stop) })
	}
	eventually(t, 15*time.Second, "renewals on "+rel.version, func() (bool, string) {
		n := len(hist.successes(time.Time{}))
		return n >= 6, fmt.Sprintf("%d renewals", n)
	})

	// Each member in turn: stopped as a package upgrade stops it, and
	// started from the same data directory by the other binary.
	replace := func(m *clusterMember, bin, what string) {
		t.Helper()
		began := time.Now()
		if code, ok := m.ts.proc.stop(30 * time.Second); !ok || code != 0 {
			t.Fatalf("stop member %s for its %s: exit %d (stopped in time: %v); log:\n%s", m.name, what, code, ok, tail(m.ts.Log(), 3000))
		}
		m.bin = bin
		m.start(t)
		m.waitHealthy(t, 3)
		eventually(t, 30*time.Second, "a renewal through "+m.name+" after its "+what, func() (bool, string) {
			return hist.succeededVia(c.members, m), "none yet"
		})
		c.measure(what+": from stop to a renewal through the member", time.Since(began))
	}
	for _, m := range c.members {
		replace(m, leaseholdBinary(t), "upgrade from "+rel.version)
	}
	replace(c.members[1], rel.bin, "downgrade to "+rel.version)

	quiet := time.Now()
	eventually(t, 10*time.Second, "renewals after the downgrade", func() (bool, string) {
		n := len(hist.successes(quiet))
		return n >= 6, fmt.Sprintf("%d renewals", n)
	})
	close(stop)
	writers.Wait()
	hist.check(t)
	gap := maxGap(hist.successes(time.Time{}))
	t.Logf("MEASURED: longest gap between successful renewals (any member) during the rolling upgrade and downgrade: %v", gap.Round(time.Millisecond))
	if _, overlap := c.lt.snapshot(); len(overlap) > 0 {
		t.Errorf("two electors led at once: %q", overlap)
	}
	c.checkSameData()
	c.summary()
}

// maxGap is the longest time between consecutive instants of ts.
func maxGap(ts []time.Time) time.Duration {
	slices.SortFunc(ts, time.Time.Compare)
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		gap = max(gap, ts[i].Sub(ts[i-1]))
	}
	return gap
}
