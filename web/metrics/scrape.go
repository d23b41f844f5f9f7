package metrics

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/leasehold/leasehold/engine"
	"github.com/leasehold/leasehold/engine/election"
)

// writeSources writes the series read from the sources at scrape time. A
// failing source's series are left out rather than failing the scrape.
func (r *Registry) writeSources(ctx context.Context, w io.Writer, src *Sources) {
	if src.Leases != nil && r.perLease.Load() {
		if leases, err := src.Leases(ctx); err == nil {
			writeLeases(w, leases)
		}
	}
	if src.Storage != nil {
		if st, err := src.Storage(ctx); err == nil {
			writeStorage(w, st)
		}
	}
	if src.Election != nil {
		e, ok := src.Election()
		// Replicas sharing a store (etcd, a cluster's members) run the
		// controller one at a time: this gauge says which one does, so an
		// operator (and the fault tests) can see it move after a crash.
		running := 0
		if ok {
			running = 1
		}
		help(w, "leasehold_election_controller_running", "gauge", "1 while this replica runs the coordinated election controller (one replica of a shared store at a time), else 0.")
		fmt.Fprintf(w, "leasehold_election_controller_running %d\n", running)
		if ok {
			writeElection(w, e)
		}
	}
	if src.Plugins != nil {
		writePlugins(w, src.Plugins())
	}
	if src.Undecodable != nil {
		writeUndecodable(w, src.Undecodable())
	}
	if src.Watches != nil {
		writeWatches(w, src.Watches())
	}
	if src.Snapshots != nil {
		writeSnapshots(w, src.Snapshots(ctx))
	}
	if src.RaftLeader != nil {
		leader := 0
		if src.RaftLeader() {
			leader = 1
		}
		help(w, "leasehold_cluster_has_leader", "gauge", "1 while this cluster member knows a raft leader, else 0: without one (no quorum) no write commits.")
		fmt.Fprintf(w, "leasehold_cluster_has_leader %d\n", leader)
	}
	if src.LeaderSlow != nil {
		slow, rtt := src.LeaderSlow()
		v := 0
		if slow {
			v = 1
		}
		help(w, "leasehold_cluster_leader_slow", "gauge", "1 while this cluster member finds the raft leader's commits slow while another member answers it several times faster (move it: leasehold cluster move-leader), else 0.")
		fmt.Fprintf(w, "leasehold_cluster_leader_slow %d\n", v)
		help(w, "leasehold_cluster_quorum_round_trip_seconds", "gauge", "The last quorum round trip this cluster member measured (a linearizable read through the raft leader, once a second).")
		fmt.Fprintf(w, "leasehold_cluster_quorum_round_trip_seconds %g\n", rtt.Seconds())
	}
	if src.Certificates != nil {
		writeCertificates(w, src.Certificates())
	}
}

func writeCertificates(w io.Writer, certs []Certificate) {
	if len(certs) == 0 {
		return
	}
	help(w, "leasehold_certificate_expiry_timestamp_seconds", "gauge", "When a certificate the server presents expires (its NotAfter), as a Unix timestamp.")
	for _, c := range certs {
		fmt.Fprintf(w, "leasehold_certificate_expiry_timestamp_seconds{use=%s,subject=%s,serial=%s} %d\n", quote(c.Use), quote(c.Subject), quote(c.Serial), c.NotAfter.Unix())
	}
}

// writeUndecodable writes the damaged-record series; the keys are in the
// server log only (they name namespaces and leases).
func writeUndecodable(w io.Writer, st engine.UndecodableStats) {
	help(w, "leasehold_storage_undecodable_objects", "gauge", "Stored objects that cannot be decoded: lists and watches skip them; delete them with ignoreStoreReadErrorWithClusterBreakingPotential.")
	fmt.Fprintf(w, "leasehold_storage_undecodable_objects %d\n", st.Records)
	help(w, "leasehold_storage_undecodable_reads_total", "counter", "Reads (lists, watches, gets, writes) that met an undecodable stored object.")
	fmt.Fprintf(w, "leasehold_storage_undecodable_reads_total %d\n", st.Skipped)
}

func writeWatches(w io.Writer, st engine.WatchStats) {
	help(w, "leasehold_watch_lagging_closed_total", "counter", "Watches closed because their client fell behind (their queue passed its budget, or the budget of all watches); their clients re-watch.")
	fmt.Fprintf(w, "leasehold_watch_lagging_closed_total %d\n", st.LaggingClosed)
	help(w, "leasehold_watch_queued_bytes", "gauge", "Stored size of the events queued for every watch, as counted against the budgets.")
	fmt.Fprintf(w, "leasehold_watch_queued_bytes %d\n", st.QueuedBytes)
	help(w, "leasehold_watch_queue_budget_bytes", "gauge", "The budget of one watch's queue (scope=\"watch\") and of all watches together (scope=\"total\").")
	fmt.Fprintf(w, "leasehold_watch_queue_budget_bytes{scope=\"watch\"} %d\nleasehold_watch_queue_budget_bytes{scope=\"total\"} %d\n", st.QueueBytesPerWatch, st.QueueBytesTotal)
}

func writeLeases(w io.Writer, leases []Lease) {
	slices.SortFunc(leases, func(a, b Lease) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	help(w, "leasehold_lease_info", "gauge", "One series per Lease with its current holder (empty when released).")
	for _, l := range leases {
		fmt.Fprintf(w, "leasehold_lease_info{namespace=%s,lease=%s,holder=%s} 1\n", quote(l.Namespace), quote(l.Name), quote(l.Holder))
	}
	help(w, "leasehold_lease_renew_timestamp_seconds", "gauge", "spec.renewTime as a Unix timestamp (leases never renewed are left out).")
	for _, l := range leases {
		if !l.RenewTime.IsZero() {
			fmt.Fprintf(w, "leasehold_lease_renew_timestamp_seconds{namespace=%s,lease=%s} %s\n", quote(l.Namespace), quote(l.Name), formatFloat(float64(l.RenewTime.UnixMicro())/1e6))
		}
	}
	help(w, "leasehold_lease_expiry_timestamp_seconds", "gauge", "spec.renewTime plus spec.leaseDurationSeconds as a Unix timestamp: time() above it means expired.")
	for _, l := range leases {
		if !l.RenewTime.IsZero() && l.LeaseDurationSeconds > 0 {
			exp := float64(l.RenewTime.UnixMicro())/1e6 + float64(l.LeaseDurationSeconds)
			fmt.Fprintf(w, "leasehold_lease_expiry_timestamp_seconds{namespace=%s,lease=%s} %s\n", quote(l.Namespace), quote(l.Name), formatFloat(exp))
		}
	}
	help(w, "leasehold_lease_transitions_total", "counter", "spec.leaseTransitions: how often the lease changed hands.")
	for _, l := range leases {
		fmt.Fprintf(w, "leasehold_lease_transitions_total{namespace=%s,lease=%s} %d\n", quote(l.Namespace), quote(l.Name), l.Transitions)
	}
}

func writeStorage(w io.Writer, st engine.StorageStats) {
	gauge := func(name, text string, v int64) {
		help(w, name, "gauge", text)
		fmt.Fprintf(w, "%s{backend=%s} %d\n", name, quote(st.Backend), v)
	}
	gauge("leasehold_storage_revision", "The store's current revision (resourceVersion).", st.Revision)
	gauge("leasehold_storage_compact_revision", "The oldest revision watches and lists can resume from.", st.CompactRevision)
	gauge("leasehold_storage_keys", "Objects in the store.", st.Keys)
	if st.SizeBytes > 0 {
		gauge("leasehold_storage_db_size_bytes", "Size of the database file.", st.SizeBytes)
	}
	if st.QuotaBytes > 0 {
		gauge("leasehold_storage_data_bytes", "Bytes of keys and values stored, as --storage-quota-bytes counts them.", st.DataBytes)
		gauge("leasehold_storage_quota_bytes", "--storage-quota-bytes: writes that would grow the stored data past it are refused.", st.QuotaBytes)
	}
}

func writeElection(w io.Writer, e election.Stats) {
	for _, c := range []struct {
		name, text string
		v          uint64
	}{
		{"decisions", "Strategy decisions made by the coordinated election controller, fallbacks included.", e.Decisions},
		{"grants", "Leases granted by the election controller.", e.Grants},
		{"preemptions", "preferredHolder set on a live holder.", e.Preemptions},
		{"preferred_cleared", "Stale or obsolete preferredHolder removed.", e.PreferredCleared},
		{"fallbacks", "Decisions made by the fallback strategy.", e.Fallbacks},
		{"strategy_errors", "Failed strategy calls (error, timeout, panic, invalid decision).", e.StrategyErrors},
		{"conflicts", "Candidates declaring different strategies at the highest binary version.", e.Conflicts},
		{"abstentions", "Leases left alone: unknown strategy or an abstaining one.", e.Abstentions},
		{"write_errors", "Failed lease or candidate writes by the controller.", e.WriteErrors},
		{"candidates_collected", "Stale LeaseCandidates deleted.", e.CandidatesCollected},
		{"backed_off", "Strategy calls skipped because the module was within its failure backoff (the fallback decided instead).", e.BackedOff},
	} {
		name := "leasehold_election_" + c.name + "_total"
		help(w, name, "counter", c.text+" Since this replica's controller started.")
		fmt.Fprintf(w, "%s %d\n", name, c.v)
	}
}

func writePlugins(w io.Writer, plugins []Plugin) {
	if len(plugins) == 0 {
		return
	}
	slices.SortFunc(plugins, func(a, b Plugin) int { return cmp.Compare(a.Name, b.Name) })
	labels := func(p Plugin) string {
		return fmt.Sprintf("plugin=%s,builtin=\"%t\"", quote(p.Name), p.Builtin)
	}
	help(w, "leasehold_plugin_calls_total", "counter", "Strategy module calls.")
	for _, p := range plugins {
		fmt.Fprintf(w, "leasehold_plugin_calls_total{%s} %d\n", labels(p), p.Calls)
	}
	help(w, "leasehold_plugin_errors_total", "counter", "Strategy module calls that failed (error, timeout, trap, invalid decision).")
	for _, p := range plugins {
		fmt.Fprintf(w, "leasehold_plugin_errors_total{%s} %d\n", labels(p), p.Errors)
	}
	const name = "leasehold_plugin_call_duration_seconds"
	help(w, name, "summary", "Strategy module call latency (quantiles over recent calls).")
	for _, p := range plugins {
		l := labels(p)
		fmt.Fprintf(w, "%s{%s,quantile=\"0.5\"} %s\n", name, l, formatFloat(p.LatencyP50.Seconds()))
		fmt.Fprintf(w, "%s{%s,quantile=\"0.99\"} %s\n", name, l, formatFloat(p.LatencyP99.Seconds()))
		fmt.Fprintf(w, "%s_sum{%s} %s\n", name, l, formatFloat(p.LatencySum.Seconds()))
		fmt.Fprintf(w, "%s_count{%s} %d\n", name, l, p.Calls)
	}
}
