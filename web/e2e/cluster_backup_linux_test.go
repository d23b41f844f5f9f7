//go:build linux

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runCLIOn runs the leasehold binary with args inside the host's network
// namespace, as an operator on that device would.
func runCLIOn(t *testing.T, h *netHost, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append(append(h.exec(), leaseholdBinary(t)), args...)
	var out, errb strings.Builder
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", argv, err)
	}
	return code, out.String(), errb.String()
}

// TestClusterBackupBarrier: a member cut off from its quorum (its network
// link down, the operator still on the device) refuses "leasehold backup"
// with an error that says why, and writes no file, while the majority
// acknowledges a lease the member never saw: its snapshot would miss it.
// Once healed, the same member's backup succeeds (waiting out an election
// still under way) and prints a revision at least that lease's.
func TestClusterBackupBarrier(t *testing.T) {
	t.Parallel()
	lab := newNetLab(t, 3)
	members := startNetCluster(t, lab.hosts)
	ctx := context.Background()
	st := waitNetHealthy(t, members[0], 3)
	// A follower is cut off; the leader keeps the quorum with the other.
	majority := byMemberName(t, members, st.Leader)
	var cut *netMember
	for _, m := range members {
		if m != majority {
			cut = m
			break
		}
	}

	cut.host.cut()
	healed := false
	t.Cleanup(func() {
		if !healed {
			cut.host.heal()
		}
	})
	holder := "acknowledged-while-cut"
	var acked *coordinationv1.Lease
	eventually(t, 30*time.Second, "the majority acknowledges a lease after the cut", func() (bool, string) {
		l, err := majority.leases(t, "default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "after-cut"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		acked = l
		return true, ""
	})

	file := filepath.Join(t.TempDir(), "cut.snapshot")
	start := time.Now()
	code, out, errOut := runCLIOn(t, cut.host, "backup", "--data-dir", cut.dataDir, file)
	took := time.Since(start)
	if code == 0 {
		t.Fatalf("leasehold backup on %s, cut off from its quorum, succeeded (it misses lease after-cut, revision %s): stdout %q", cut.name, acked.ResourceVersion, out)
	}
	if !strings.Contains(errOut, "cannot confirm that it holds every acknowledged write") || !strings.Contains(errOut, "quorum") {
		t.Errorf("leasehold backup on the cut-off member: exit %d, stderr %q: want the reason (no quorum, it cannot confirm it holds every acknowledged write)", code, errOut)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused backup left %s (%v)", file, err)
	}
	t.Logf("MEASURED: the backup on the cut-off member %s refused in %v", cut.name, took.Round(time.Millisecond))

	cut.host.heal()
	healed = true
	waitNetHealthy(t, cut, 3)
	// Right after the heal an election may be under way (beside busy
	// CPUs, for seconds): the backup waits it out rather than refuse.
	const waits = "The backup waits for a raft leader"
	waitedBefore := strings.Count(cut.ts.Log(), waits)
	start = time.Now()
	code, out, errOut = runCLIOn(t, cut.host, "backup", "--data-dir", cut.dataDir, file)
	took = time.Since(start)
	m := backupRevision.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("leasehold backup on %s after the heal: exit %d, stdout %q, stderr %q; want \"wrote FILE (N bytes, revision R, ...)\"", cut.name, code, out, errOut)
	}
	t.Logf("MEASURED: the backup on the healed member %s succeeded in %v (it waited for a raft leader: %v)",
		cut.name, took.Round(time.Millisecond), strings.Count(cut.ts.Log(), waits) > waitedBefore)
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	ackedRev, _ := strconv.ParseInt(acked.ResourceVersion, 10, 64)
	if rev < ackedRev {
		t.Errorf("the healed member's backup has revision %d, below the acknowledged lease's %d", rev, ackedRev)
	}
}
