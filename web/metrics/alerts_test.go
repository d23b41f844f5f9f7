package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
	"github.com/leasehold/leasehold/internal/testneeds"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
)

// monitoringDir holds the alert rules, their promtool unit tests and the
// Grafana dashboard that ship with leasehold (the tarball and the .deb).
const monitoringDir = "../../docs/monitoring"

// fullScrape is a scrape with every source set and per-lease series on:
// every family leasehold can export.
func fullScrape(t *testing.T) string {
	t.Helper()
	r := New()
	r.SetPerLease(true)
	r.ObserveRequest(RequestLabels{Verb: "GET", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Code: 200}, time.Millisecond)
	r.ObserveCommit(time.Millisecond, 1, nil)
	r.ObserveBackup(time.Unix(2000000000, 0))
	r.SetSources(Sources{
		Leases: func(context.Context) ([]Lease, error) {
			return []Lease{{Namespace: "ns", Name: "l", Holder: "h", RenewTime: time.Unix(100, 0), LeaseDurationSeconds: 10, Transitions: 1}}, nil
		},
		Storage: func(context.Context) (engine.StorageStats, error) {
			return engine.StorageStats{Backend: "boltdb", Revision: 5, CompactRevision: 1, Keys: 3, SizeBytes: 4096}, nil
		},
		Election:    func() (election.Stats, bool) { return election.Stats{}, true },
		Plugins:     func() []Plugin { return []Plugin{{Name: "p", Calls: 1}} },
		Undecodable: func() engine.UndecodableStats { return engine.UndecodableStats{} },
		Watches:     func() engine.WatchStats { return engine.WatchStats{} },
		RaftLeader:  func() bool { return true },
		Snapshots: func(context.Context) clusterapi.Snapshots {
			ok := &clusterapi.SnapshotRun{Time: time.Unix(2000000000, 0), Result: clusterapi.SnapshotOK, Revision: 5, SizeBytes: 4096, DurationMs: 20}
			return clusterapi.Snapshots{IntervalSeconds: 3600, Retention: 5, Last: ok, LastSuccess: ok,
				Runs:  map[string]uint64{clusterapi.SnapshotOK: 1, clusterapi.SnapshotFailed: 0, clusterapi.SnapshotRefusedLowSpace: 0},
				Files: []clusterapi.SnapshotFile{{Name: "leasehold-20330518T033320Z-r5.db", Time: ok.Time, Revision: 5, SizeBytes: 4096}}}
		},
		Certificates: func() []Certificate {
			return []Certificate{{Use: "serving", Subject: "s", Serial: "1", NotAfter: time.Unix(2000000000, 0)}}
		},
	})
	var b bytes.Buffer
	r.WritePrometheus(context.Background(), &b)
	return b.String()
}

// exported returns the series names of a scrape (histogram and summary
// series included: name_bucket, name_sum, name_count).
func exported(scrape string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.SplitSeq(scrape, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

var seriesName = regexp.MustCompile(`\b(?:leasehold|process|go)_[a-z0-9_]+\b`)

// TestAlertRules runs `promtool check rules` and `promtool test rules` on
// the shipped alert rules, and checks that every series the rules and the
// dashboard use is one leasehold exports: a renamed metric fails here,
// not silently in someone's Prometheus.
func TestAlertRules(t *testing.T) {
	promtool := testneeds.Tool(t, "promtool", "apt-get install -y prometheus")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = monitoringDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s in docs/monitoring: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", "leasehold-alerts.yml")
	run("test", "rules", "leasehold-alerts_test.yml", "leasehold-alerts_backup_test.yml", "leasehold-alerts_snapshot_test.yml")

	have := exported(fullScrape(t))
	for _, file := range []string{"leasehold-alerts.yml", "leasehold-dashboard.json"} {
		text, err := os.ReadFile(filepath.Join(monitoringDir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(seriesName.FindAllString(string(text), -1)))) {
			if !have[name] {
				t.Errorf("docs/monitoring/%s uses %s, which leasehold does not export (web/metrics)", file, name)
			}
		}
	}
}

// TestDashboardQueries checks the dashboard's JSON and hands every query
// to `promtool check rules` (as recording rules, with the dashboard's
// variables filled in), so that a query with a syntax error fails here
// rather than as an empty panel.
func TestDashboardQueries(t *testing.T) {
	promtool := testneeds.Tool(t, "promtool", "apt-get install -y prometheus")
	text, err := os.ReadFile(filepath.Join(monitoringDir, "leasehold-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(text, &dash); err != nil {
		t.Fatalf("leasehold-dashboard.json: %v", err)
	}
	vars := strings.NewReplacer("$job", "leasehold", "$instance", ".*", "$__rate_interval", "5m")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q, err := json.Marshal(vars.Replace(tg.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			rules.WriteString("      - record: dashboard:query\n        expr: " + string(q) + "\n")
			queries++
		}
	}
	if dash.UID == "" || queries < 20 {
		t.Fatalf("leasehold-dashboard.json: uid %q and %d queries; want a uid and the dashboard's queries", dash.UID, queries)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("a dashboard query does not parse: promtool check rules: %v\n%s", err, out)
	}
}
