package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testneeds"
)

// snapshotName is a scheduled snapshot's file name, with its revision.
var snapshotName = regexp.MustCompile(`leasehold-\d{8}T\d{6}Z-r(\d+)\.db`)

// TestClusterScheduledSnapshots: members on a two-second schedule keep
// their newest two snapshots; a follower's holds every write acknowledged
// before it began (its barrier read); "leasehold backup list" lists them
// from the data directory (checked again) and through the server,
// "cluster status", the UI's system page and /metrics show the last one;
// and "leasehold restore" of one starts a new cluster with the data.
func TestClusterScheduledSnapshots(t *testing.T) {
	testneeds.Slow(t, "starts embedded etcd members and restores one")
	t.Setenv("LEASEHOLD_SNAPSHOT_INTERVAL", "2s")
	t.Setenv("LEASEHOLD_SNAPSHOT_RETENTION", "2")
	t.Setenv("LEASEHOLD_SNAPSHOT_MIN_FREE_BYTES", "1048576")
	members := startCluster(t)
	cs := clientset(t, restConfig(t, members[0].ts, wireProtobuf))
	createLeases(t, cs, "default", "kept", 30)
	want, listRV := holders(t, cs, "default")
	listed, _ := strconv.ParseInt(listRV, 10, 64)
	acked := time.Now()

	st := members[2].waitHealthy(t, 3)
	var follower *clusterMember
	for _, m := range members {
		if m.name != st.Leader {
			follower = m
		}
	}
	dir := filepath.Join(follower.dataDir, "snapshots")
	// A snapshot started after the writes were acknowledged holds them.
	var newest string
	var data []byte // newest's bytes, read at once: the schedule prunes it 4s later
	eventually(t, 60*time.Second, follower.name+" keeps two snapshots, the newest started after the writes", func() (bool, string) {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) != 2 {
			return false, fmt.Sprint(names)
		}
		newest = names[1] // by name: time, then revision
		info, err := os.Stat(filepath.Join(dir, newest))
		if err != nil || !info.ModTime().After(acked.Add(time.Second)) {
			return false, fmt.Sprint(names)
		}
		data, err = os.ReadFile(filepath.Join(dir, newest))
		return err == nil, fmt.Sprint(names, err)
	})
	m := snapshotName.FindStringSubmatch(newest)
	if m == nil {
		t.Fatalf("snapshot file %q is not named leasehold-<time>-r<revision>.db", newest)
	}
	if rev, _ := strconv.ParseInt(m[1], 10, 64); rev < listed {
		t.Errorf("the follower's snapshot %s is below revision %d, the list's after the last acknowledged write", newest, listed)
	}

	// The schedule goes on meanwhile: a snapshot the list read may be
	// pruned before its check, so the list names one or two, each ok.
	code, out, errOut := runCLI(t, "backup", "list", "--data-dir", follower.dataDir)
	if n := strings.Count(out, "leasehold-"); code != 0 || n < 1 || n > 2 || strings.Count(out, "  ok\n") != n {
		t.Errorf("backup list --data-dir: exit %d, stdout %q, stderr %q; want one or two snapshots (retention 2), each checked ok", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "backup", "list", "--kubeconfig", follower.ts.Kubeconfig)
	if code != 0 || !strings.Contains(out, "schedule: every 2s, the newest 2 kept") || !strings.Contains(out, " ok: leasehold-") {
		t.Errorf("backup list --kubeconfig: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "cluster", "status", "--kubeconfig", follower.ts.Kubeconfig)
	if code != 0 || !regexp.MustCompile(`last snapshot of this member: \S+ \(\S+ ago\) ok: leasehold-`).MatchString(out) {
		t.Errorf("cluster status: exit %d, stdout %q, stderr %q; want the last snapshot", code, out, errOut)
	}
	var sys struct {
		Snapshots *struct {
			Retention int `json:"retention"`
			Last      struct {
				Result string `json:"result"`
			} `json:"last"`
			Files []json.RawMessage `json:"files"`
		} `json:"snapshots"`
	}
	uiGet(t, follower.ts, "/ui/api/v1/system", &sys)
	if sys.Snapshots == nil || sys.Snapshots.Retention != 2 || sys.Snapshots.Last.Result == "" || len(sys.Snapshots.Files) == 0 {
		t.Errorf("the UI's system status has no snapshots: %+v", sys.Snapshots)
	}
	_, _, metrics := httpGet(t, follower.ts.URL+"/metrics")
	for _, series := range []string{"leasehold_snapshot_last_success_timestamp_seconds ", `leasehold_snapshot_runs_total{result="ok"} `,
		"leasehold_snapshot_interval_seconds 2", "leasehold_snapshot_low_space 0", "leasehold_snapshot_files 2"} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %q", series)
		}
	}

	// The cluster is lost; the follower's newest snapshot restores it.
	snap := filepath.Join(t.TempDir(), newest)
	if err := os.WriteFile(snap, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		m.ts.proc.kill()
	}
	code, out, errOut = runCLI(t, "restore", "--data-dir", members[0].dataDir, snap)
	if code != 0 || !strings.Contains(out, "staged ") {
		t.Fatalf("leasehold restore %s: exit %d, stdout %q, stderr %q", newest, code, out, errOut)
	}
	r1Args := []string{"--cluster-init", "--cluster-token", "restored-token-0123", "--member-name", "m1"}
	for i, a := range members[0].args {
		if a == "--peer-listen" || a == "--cluster-client-listen" {
			r1Args = append(r1Args, a, members[0].args[i+1])
		}
	}
	r1 := startMemberIn(t, "r1", members[0].dataDir, r1Args...)
	got, _ := holders(t, clientset(t, restConfig(t, r1.ts, wireProtobuf)), "default")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("leases restored from the scheduled snapshot:\n%v\nwant\n%v", got, want)
	}
}
