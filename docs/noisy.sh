#!/usr/bin/env bash
# Noisy-neighbour run (the README's "Renewals under noisy neighbours"):
# renewals offered at 200/s on 200 leases while a neighbour misbehaves on
# 10,000 leases in namespace "big". Each scenario starts a fresh server
# (fsync on, default flags) and prints one line: the renewals done, the
# client's p99, the server's own GET and PUT p99 (its /metrics), the
# server's peak RSS (VmHWM), what the neighbour got, and the load average
# before and at the end of the run.
#
#   docs/noisy.sh [SCENARIO...]   # default: none list watch patch idle
#
# "none" is the renewals alone. CLUSTER=1 runs each scenario against a
# 3-member cluster on loopback (docs/cluster-bench.sh; renewals and
# neighbour on the first member; peak RSS of each member). AB_FLAGS runs
# each scenario twice back to back, first with these serve flags added
# ("before"), then without ("after"): the README's before/after pairs are
# AB_FLAGS=--flowcontrol-spare-procs=0 (the Go processors as before).
# SERVER_BIN runs another server binary (e.g. an older build); SERVER_FLAGS
# adds serve flags; BENCH_FLAGS adds bench flags (--noise-process=false
# runs the neighbour inside the measuring process, as before); DURATION is
# the measured time (20s). Needs: go, curl, jq (and openssl for CLUSTER).
# On a shared machine compare only pairs run back to back at a similar load.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench-results}
mkdir -p "$OUT"
WORK=$(mktemp -d)
BIN=$WORK/leasehold
PORT=${PORT:-18432}
SERVER=http://127.0.0.1:$PORT
go build -o "$BIN" .
SRV=${SERVER_BIN:-$BIN}
DURATION=${DURATION:-20s}
LOAD="--leases 200 --clients 50 --rate 200 --warmup 5s --duration $DURATION"

SRV_PID=
start_server() { # $1: extra serve flags
	# shellcheck disable=SC2086
	"$SRV" serve --listen 127.0.0.1:$PORT --data-dir "$WORK/data" --log-level warn --write-kubeconfig - ${SERVER_FLAGS:-} $1 >"$WORK/server.log" 2>&1 &
	SRV_PID=$!
	for _ in $(seq 200); do curl -fsS "$SERVER/readyz" >/dev/null 2>&1 && return; sleep 0.05; done
	echo "server did not become ready" >&2; cat "$WORK/server.log" >&2; exit 1
}
stop_server() { [ -n "$SRV_PID" ] && kill "$SRV_PID" && wait "$SRV_PID" || true; SRV_PID=; }
trap 'stop_server; rm -rf "$WORK"' EXIT

summary() { # $1: report, $2: label, $3: load before
	jq -c --arg run "$2" --arg load_before "$3" '{run: $run, noise: (.noise.mode // "none"), done_pct: ((.done_ratio // 0) * 100 | floor),
		p99_ms: .latency.p99_ms, max_ms: .latency.max_ms,
		server_get_p99_ms: (.server_latency.get_p99_ms // null | if . then (. * 10 | round / 10) else . end),
		server_put_p99_ms: (.server_latency.put_p99_ms // null | if . then (. * 10 | round / 10) else . end),
		peak_rss_mib: ([(.server_peak_rss_bytes // 0), (.members[]?.peak_rss_bytes // 0)] | map(. / 1048576 | floor)),
		errors, first_error, noise_ops_per_sec: (.noise.ops_per_sec // null), noise_rejected: .noise.rejected,
		noise_errors: .noise.errors, noise_first_error: .noise.first_error,
		load_before: $load_before, load_at_end: (.loadavg_at_end | split(" ")[0:3] | join(" "))}' "$1" 2>/dev/null || cat "$1"
}

run_one() { # $1: scenario, $2: extra serve flags, $3: label
	local m=$1 noise="" json="$OUT/noisy-$1-$3.json" load
	[ "$m" = none ] || noise="--noise $m"
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	if [ -n "${CLUSTER:-}" ]; then
		json="$OUT/noisy-cluster-$m-$3.json"
		# shellcheck disable=SC2086
		OUT="$WORK/cluster" SERVER_BIN="$SRV" SERVER_FLAGS="${SERVER_FLAGS:-} $2" \
			BENCH_FLAGS="$LOAD $noise ${BENCH_FLAGS:-}" docs/cluster-bench.sh 1 >/dev/null
		cp "$WORK/cluster/cluster-1.json" "$json"
	else
		rm -rf "$WORK/data"
		start_server "$2"
		# shellcheck disable=SC2086
		"$BIN" bench --server "$SERVER" --server-pid "$SRV_PID" --output json $LOAD $noise ${BENCH_FLAGS:-} >"$json" || true
		stop_server
	fi
	summary "$json" "$3" "$load"
}

for m in ${@:-none list watch patch idle}; do
	if [ -n "${AB_FLAGS:-}" ]; then
		run_one "$m" "$AB_FLAGS" before
	fi
	label=run
	[ -z "${AB_FLAGS:-}" ] || label=after
	run_one "$m" "" "$label"
done
