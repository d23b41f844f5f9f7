package metrics

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
)

func TestRegistryOutput(t *testing.T) {
	r := New()
	r.SetPerLease(true)
	r.ObserveRequest(RequestLabels{Verb: "LIST", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Code: 200}, 3*time.Millisecond)
	r.ObserveRequest(RequestLabels{Verb: "LIST", Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Code: 200}, 2*time.Second)
	r.ObserveCommit(time.Millisecond, 4, nil)
	end := r.WatchStarted()
	r.SetSources(Sources{
		Leases: func(context.Context) ([]Lease, error) {
			return []Lease{{Namespace: "ns", Name: "l", Holder: "a\\b\"c\nd", RenewTime: time.Unix(100, 500000000), LeaseDurationSeconds: 10, Transitions: 2}}, nil
		},
		Election:    func() (election.Stats, bool) { return election.Stats{Decisions: 7}, true },
		Undecodable: func() engine.UndecodableStats { return engine.UndecodableStats{Records: 1, Skipped: 3} },
		Watches: func() engine.WatchStats {
			return engine.WatchStats{QueuedBytes: 1234, LaggingClosed: 3, QueueBytesPerWatch: 8 << 20, QueueBytesTotal: 64 << 20}
		},
	})
	var b bytes.Buffer
	r.WritePrometheus(context.Background(), &b)
	end()
	end() // idempotent
	out := b.String()
	for _, want := range []string{
		`leasehold_http_requests_total{verb="LIST",group="coordination.k8s.io",version="v1",resource="leases",code="200"} 2`,
		`leasehold_http_request_duration_seconds_bucket{verb="LIST",group="coordination.k8s.io",version="v1",resource="leases",le="0.005"} 1`,
		`leasehold_http_request_duration_seconds_bucket{verb="LIST",group="coordination.k8s.io",version="v1",resource="leases",le="2.5"} 2`,
		`leasehold_http_request_duration_seconds_count{verb="LIST",group="coordination.k8s.io",version="v1",resource="leases"} 2`,
		`leasehold_storage_commit_duration_seconds_count 1`,
		`leasehold_storage_commit_writes_total 4`,
		`leasehold_watch_streams 1`,
		`leasehold_lease_info{namespace="ns",lease="l",holder="a\\b\"c\nd"} 1`,
		`leasehold_lease_renew_timestamp_seconds{namespace="ns",lease="l"} 100.5`,
		`leasehold_lease_expiry_timestamp_seconds{namespace="ns",lease="l"} 110.5`,
		`leasehold_election_controller_running 1`,
		`leasehold_election_decisions_total 7`,
		`leasehold_storage_undecodable_objects 1`,
		`leasehold_storage_undecodable_reads_total 3`,
		`leasehold_watch_lagging_closed_total 3`,
		`leasehold_watch_queued_bytes 1234`,
		`leasehold_watch_queue_budget_bytes{scope="watch"} 8388608`,
		`leasehold_watch_queue_budget_bytes{scope="total"} 67108864`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	r.SetPerLease(false)
	b.Reset()
	r.WritePrometheus(context.Background(), &b)
	if strings.Contains(b.String(), "leasehold_lease_info") || !strings.Contains(b.String(), "leasehold_watch_streams 0") {
		t.Error("per-lease series still written with SetPerLease(false), or the watch was not released")
	}
}

// TestElectionControllerRunning: a replica not running the controller (a
// shared store elected another) says 0 and has no controller counters.
func TestElectionControllerRunning(t *testing.T) {
	r := New()
	r.SetSources(Sources{Election: func() (election.Stats, bool) { return election.Stats{}, false }})
	var b bytes.Buffer
	r.WritePrometheus(context.Background(), &b)
	out := b.String()
	if !strings.Contains(out, "\nleasehold_election_controller_running 0\n") {
		t.Errorf("output lacks leasehold_election_controller_running 0:\n%s", out)
	}
	if strings.Contains(out, "leasehold_election_decisions_total") {
		t.Errorf("a replica without the controller reports its counters:\n%s", out)
	}
}

// TestClusterAndCertificateSeries: the raft leader gauge of a cluster
// member and the expiry of each presented certificate.
func TestClusterAndCertificateSeries(t *testing.T) {
	r := New()
	leader := false
	r.SetSources(Sources{
		RaftLeader: func() bool { return leader },
		Certificates: func() []Certificate {
			return []Certificate{{Use: "serving", Subject: "device-1", Serial: "2a", NotAfter: time.Unix(2000000000, 0)}}
		},
	})
	scrape := func() string {
		var b bytes.Buffer
		r.WritePrometheus(context.Background(), &b)
		return b.String()
	}
	out := scrape()
	for _, want := range []string{
		"\nleasehold_cluster_has_leader 0\n",
		"\nleasehold_certificate_expiry_timestamp_seconds{use=\"serving\",subject=\"device-1\",serial=\"2a\"} 2000000000\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	leader = true
	if out := scrape(); !strings.Contains(out, "\nleasehold_cluster_has_leader 1\n") {
		t.Errorf("with a leader, output lacks leasehold_cluster_has_leader 1:\n%s", out)
	}
}

// TestClusterLeaderSlowSeries: a member's verdict on the raft leader and
// its last quorum round trip.
func TestClusterLeaderSlowSeries(t *testing.T) {
	r := New()
	slow := false
	r.SetSources(Sources{LeaderSlow: func() (bool, time.Duration) { return slow, 1500 * time.Millisecond }})
	scrape := func() string {
		var b bytes.Buffer
		r.WritePrometheus(context.Background(), &b)
		return b.String()
	}
	for _, want := range []string{"\nleasehold_cluster_leader_slow 0\n", "\nleasehold_cluster_quorum_round_trip_seconds 1.5\n"} {
		if out := scrape(); !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	slow = true
	if out := scrape(); !strings.Contains(out, "\nleasehold_cluster_leader_slow 1\n") {
		t.Errorf("with a slow leader, output lacks leasehold_cluster_leader_slow 1:\n%s", out)
	}
}
