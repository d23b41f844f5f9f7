#!/usr/bin/env bash
# Renewal throughput and CPU of a 3-member cluster on loopback (the
# README's "A 3-member cluster" figures): three `serve --cluster-init` /
# `--join` processes on this machine, `leasehold bench` against the first
# member, the CPU of all three members summed per renewal.
#
#   docs/cluster-bench.sh [RUNS]   # default 1 run; one JSON report per run in $OUT
#
# SERVER_BIN runs another server binary (an older build, for a
# before/after: run both back to back, the machine is shared); SERVER_FLAGS
# adds serve flags to every member; BENCH_FLAGS replaces the load (default
# 64 clients over 1,000 leases, 10 s after a 5 s warm-up; the README's patch
# storm: "--leases 200 --clients 50 --rate 200 --warmup 5s --duration 30s
# --noise patch --noise-objects 100"); PROFILE=N takes
# an N-second CPU profile of the first member during the run
# ($OUT/cluster-cpu-RUN.pprof). Needs: go, curl, jq, openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1}
OUT=${OUT:-$PWD/bench-results}
mkdir -p "$OUT"
WORK=$(mktemp -d)
BIN=$WORK/leasehold
go build -o "$BIN" .
SRV=${SERVER_BIN:-$BIN}
BASE=${PORT:-18440}
BENCH_FLAGS=${BENCH_FLAGS:---clients 64 --leases 1000 --warmup 5s --duration 10s}

PIDS=()
start_members() {
	rm -rf "$WORK"/d1 "$WORK"/d2 "$WORK"/d3 "$WORK"/*.url
	(umask 077; openssl rand -hex 32 >"$WORK/token")
	local join=""
	for i in 1 2 3; do
		local args=(--cluster-init)
		[ -n "$join" ] && args=(--join "$join")
		# shellcheck disable=SC2086
		"$SRV" serve "${args[@]}" --cluster-token-file "$WORK/token" --data-dir "$WORK/d$i" \
			--listen 127.0.0.1:$((BASE + i)) --peer-listen 127.0.0.1:$((BASE + 100 * i + 1000)) \
			--member-name "m$i" --ready-file "$WORK/d$i.url" --log-level warn --write-kubeconfig - \
			--profiling-listen 127.0.0.1:$((BASE + 10 + i)) ${SERVER_FLAGS:-} >"$WORK/m$i.log" 2>&1 &
		PIDS+=($!)
		for _ in $(seq 600); do [ -e "$WORK/d$i.url" ] && break; sleep 0.1; done
		[ -e "$WORK/d$i.url" ] || { echo "member m$i did not start" >&2; cat "$WORK/m$i.log" >&2; exit 1; }
		join=http://127.0.0.1:$((BASE + i))
	done
}
stop_members() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
trap 'stop_members; rm -rf "$WORK"' EXIT

for run in $(seq "$RUNS"); do
	start_members
	echo "run $run: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	PROF_PID=
	if [ -n "${PROFILE:-}" ]; then
		(sleep 6; curl -fsS -o "$OUT/cluster-cpu-$run.pprof" "http://127.0.0.1:$((BASE + 11))/debug/pprof/profile?seconds=$PROFILE") &
		PROF_PID=$!
	fi
	# shellcheck disable=SC2086
	"$BIN" bench --server "http://127.0.0.1:$((BASE + 1))" --server-pid "${PIDS[0]}" \
		--member-pids "${PIDS[1]},${PIDS[2]}" --output json $BENCH_FLAGS >"$OUT/cluster-$run.json" || true
	[ -z "$PROF_PID" ] || wait "$PROF_PID" || true
	stop_members
	jq -c '{renewals_per_sec, done_pct: (if .done_ratio then .done_ratio * 100 | floor else null end), errors, conflicts, first_error,
		p50_ms: .latency.p50_ms, p99_ms: .latency.p99_ms, cluster_cpu_per_renewal_us, cluster_cores, server_cpu_per_renewal_us,
		peak_rss_mib: ([(.server_peak_rss_bytes // 0), (.members[]?.peak_rss_bytes // 0)] | map(. / 1048576 | floor)),
		noise_ops_per_sec: .noise.ops_per_sec, noise_rejected: .noise.rejected, noise_errors: .noise.errors, load: .loadavg_at_end}' \
		"$OUT/cluster-$run.json" 2>/dev/null || cat "$OUT/cluster-$run.json"
done
