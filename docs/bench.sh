#!/usr/bin/env bash
# Full performance run of leasehold (the README's "Performance" figures).
#
#   docs/bench.sh [RUNS]        # default 3 runs per scenario; medians are reported
#
# Builds the binary, then for each scenario starts a fresh server (fsync on,
# default flags) on a temporary data directory, runs "leasehold bench"
# against it on the same machine, and prints one JSON report per run to
# $OUT (default ./bench-results) plus a summary of medians. Needs: go, curl, jq.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
OUT=${OUT:-$PWD/bench-results}
mkdir -p "$OUT"
WORK=$(mktemp -d)
BIN=$WORK/leasehold
PORT=${PORT:-18431}
SERVER=http://127.0.0.1:$PORT
go build -o "$BIN" .

SRV_PID=
start_server() { # data dir
	"$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$1" --log-level warn --write-kubeconfig - >"$WORK/server.log" 2>&1 &
	SRV_PID=$!
	for _ in $(seq 100); do curl -fsS "$SERVER/readyz" >/dev/null 2>&1 && return; sleep 0.05; done
	echo "server did not become ready" >&2; cat "$WORK/server.log" >&2; exit 1
}
stop_server() { [ -n "$SRV_PID" ] && kill "$SRV_PID" && wait "$SRV_PID" || true; SRV_PID=; }
trap 'stop_server; rm -rf "$WORK"' EXIT

# scenario NAME BENCH-ARGS...: RUNS fresh servers, one JSON report each.
scenario() {
	local name=$1; shift
	for run in $(seq "$RUNS"); do
		rm -rf "$WORK/data"
		start_server "$WORK/data"
		"$BIN" bench --server "$SERVER" --server-pid "$SRV_PID" --output json "$@" >"$OUT/$name-$run.json" || true
		stop_server
		echo "$name run $run: $(jq -c '{renewals_per_sec, p99: .latency.p99_ms, cpu_us: .server_cpu_per_renewal_us, errors, conflicts, watch: .watch.lag.p99_ms, list: .list.latency.p50_ms}' "$OUT/$name-$run.json" 2>/dev/null || cat "$OUT/$name-$run.json")"
	done
}

scenario renew-1k    --clients 64 --leases 1000 --duration 10s --warmup 2s
scenario renew-100k  --clients 64 --leases 100000 --duration 10s --warmup 2s
scenario list-10k    --clients 8 --leases 10000 --duration 2s --warmup 0s --list 50
scenario watch-1k    --clients 16 --leases 1000 --duration 10s --warmup 1s --rate 1000 --watchers 1000
scenario watch-100   --clients 16 --leases 1000 --duration 10s --warmup 1s --rate 1000 --watchers 100
scenario churn       --clients 64 --leases 1000 --duration 10s --warmup 2s --candidates 20 --watchers 10

# Footprint: idle RSS with 10,000 leases, database size per lease, time to ready.
# Two idle figures: a server at rest on a database of 10,000 leases
# (restarted, 10 s without requests), and the same server 10 s after a 5 s
# full-load burst, when it still holds that burst's watch history
# (--watch-history-max-bytes) until --watch-history expires it.
kib() { awk -v f="$1:" '$1 == f {print $2}' /proc/$SRV_PID/status; }
rm -rf "$WORK/data"
start_server "$WORK/data"
"$BIN" bench --server "$SERVER" --clients 8 --leases 10000 --duration 1s --warmup 0s --output json >/dev/null
stop_server
start_server "$WORK/data"
sleep 10
rss=$(kib VmRSS) anon=$(kib RssAnon) file=$(kib RssFile)
"$BIN" bench --server "$SERVER" --clients 64 --leases 10000 --duration 5s --warmup 0s --output json >/dev/null
sleep 10
rss_after_load=$(kib VmRSS)
stop_server
db=$(stat -c %s "$WORK/data/leasehold.db")
ready=()
for run in $(seq 5); do
	t0=$(date +%s%N)
	start_server "$WORK/data"
	ready+=($(( ($(date +%s%N) - t0) / 1000000 )))
	stop_server
done
echo "{\"idle_rss_kib_10k_leases\": $rss, \"idle_rss_anon_kib\": $anon, \"idle_rss_file_kib\": $file, \"idle_rss_kib_after_load\": $rss_after_load, \"db_bytes\": $db, \"db_bytes_per_lease\": $((db / 10000)), \"ready_ms\": [${ready[*]}]}" | tee "$OUT/footprint.json"

echo
echo "medians over $RUNS runs (machine: $(nproc) CPUs, $(cut -d' ' -f1-3 /proc/loadavg) load):"
for name in renew-1k renew-100k list-10k watch-1k watch-100 churn; do
	jq -s --arg n "$name" '
		def med(f): (map(f) | sort | .[(length-1)/2|floor]);
		{scenario: $n, renewals_per_sec: med(.renewals_per_sec), p50_ms: med(.latency.p50_ms), p99_ms: med(.latency.p99_ms),
		 server_cpu_us: med(.server_cpu_per_renewal_us), errors: (map(.errors)|add), conflicts: (map(.conflicts)|add),
		 watch_lag_p99_ms: med(.watch.lag.p99_ms // 0), watchers_complete: med(.watch.watchers_complete // 0),
		 list_p50_ms: med(.list.latency.p50_ms // 0)}' "$OUT/$name"-*.json
done
