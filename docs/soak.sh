#!/usr/bin/env bash
# Soak run: constant renewals and watches against one server for DURATION
# (default 10m), printing the server's RSS, goroutines and threads every
# INTERVAL seconds (default 30). Flat columns mean no leak.
#
#   docs/soak.sh [DURATION] [INTERVAL]
#
# The server runs with --profiling-listen on loopback so that the goroutine
# count can be read from /debug/pprof/goroutine. Needs: go, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10m}
INTERVAL=${2:-30}
WORK=$(mktemp -d)
BIN=$WORK/leasehold
PORT=${PORT:-18432}
PPROF=127.0.0.1:${PPROF_PORT:-18433}
go build -o "$BIN" .
"$BIN" serve --listen 127.0.0.1:$PORT --data-dir "$WORK/data" --log-level warn --write-kubeconfig - \
	--profiling-listen "$PPROF" >"$WORK/server.log" 2>&1 &
SRV=$!
trap 'kill $SRV $LOAD 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; sleep 0.05; done

# 2,000 renewals/s over 1,000 leases, 50 watchers, candidate churn.
"$BIN" bench --server "http://127.0.0.1:$PORT" --server-pid $SRV --clients 32 --leases 1000 \
	--rate 2000 --watchers 50 --candidates 10 --warmup 0s --duration "$DURATION" >"$WORK/bench.txt" 2>&1 &
LOAD=$!

printf '%8s %10s %11s %8s %10s\n' elapsed rss_mib goroutines threads cpu_s
start=$(date +%s)
while kill -0 $LOAD 2>/dev/null; do
	rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' /proc/$SRV/status)
	thr=$(awk '/Threads/ {print $2}' /proc/$SRV/status)
	gor=$(curl -fsS "http://$PPROF/debug/pprof/goroutine?debug=1" | awk 'NR == 1 { print $NF }')
	cpu=$(awk '{printf "%.1f", ($14+$15)/100}' /proc/$SRV/stat)
	printf '%8s %10s %11s %8s %10s\n' "$(( $(date +%s) - start ))s" "$rss" "$gor" "$thr" "$cpu"
	sleep "$INTERVAL"
done
wait $LOAD || true
echo
cat "$WORK/bench.txt"
