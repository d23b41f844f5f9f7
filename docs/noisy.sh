#!/usr/bin/env bash
# Noisy-neighbour run (the README's "Renewals under noisy neighbours"):
# renewals offered at 200/s on 200 leases while a neighbour misbehaves on
# 10,000 leases in namespace "big". Each scenario starts a fresh server
# (fsync on, default flags) and reports the renewals done, their p99 and
# the server's peak RSS (VmHWM).
#
#   docs/noisy.sh [SCENARIO...]   # default: list watch patch idle
#
# SERVER_BIN runs another server binary (e.g. an older build, for a
# before/after); SERVER_FLAGS adds serve flags; BENCH_FLAGS adds bench
# flags (--noise-process=false runs the neighbour inside the measuring
# process, as before). Needs: go, curl, jq.
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

SRV_PID=
start_server() {
	# shellcheck disable=SC2086
	"$SRV" serve --listen 127.0.0.1:$PORT --data-dir "$WORK/data" --log-level warn --write-kubeconfig - ${SERVER_FLAGS:-} >"$WORK/server.log" 2>&1 &
	SRV_PID=$!
	for _ in $(seq 200); do curl -fsS "$SERVER/readyz" >/dev/null 2>&1 && return; sleep 0.05; done
	echo "server did not become ready" >&2; cat "$WORK/server.log" >&2; exit 1
}
stop_server() { [ -n "$SRV_PID" ] && kill "$SRV_PID" && wait "$SRV_PID" || true; SRV_PID=; }
trap 'stop_server; rm -rf "$WORK"' EXIT

for mode in "${@:-list watch patch idle}"; do
	for m in $mode; do
		rm -rf "$WORK/data"
		start_server
		echo "$m: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
		"$BIN" bench --server "$SERVER" --server-pid "$SRV_PID" --output json \
			--leases 200 --clients 50 --rate 200 --warmup 5s --duration "$DURATION" \
			--noise "$m" ${BENCH_FLAGS:-} >"$OUT/noisy-$m.json" || true
		stop_server
		jq -c '{noise: .noise.mode, offered, done_pct: ((.done_ratio // 0) * 100 | floor), renewals_per_sec, p99_ms: .latency.p99_ms, max_ms: .latency.max_ms, server_get_p99_ms: .server_latency.get_p99_ms, server_put_p99_ms: .server_latency.put_p99_ms, errors, first_error, peak_rss_mib: ((.server_peak_rss_bytes // 0) / 1048576 | floor), noise_ops_per_sec: .noise.ops_per_sec, noise_rejected: .noise.rejected, noise_errors: .noise.errors, noise_first_error: .noise.first_error, load: .loadavg_at_end}' "$OUT/noisy-$m.json" 2>/dev/null || cat "$OUT/noisy-$m.json"
	done
done
