#!/usr/bin/env bash
# Footprint (the README's "Footprint"): memory and start time with 10,000
# leases.
#
#   docs/footprint.sh [MODE...]     # default: single restart member
#
#   single   one device: fresh server, LEASES leases created (as client-go
#            writes them), then idle for SETTLE (default 7m: the 5-minute
#            --watch-history holds the writes' values until it expires,
#            trimmed within 30 s of that, and the server returns freed
#            memory once a minute while quiet, so 6m could measure before
#            that release); target: RssAnon at most 15 MB.
#   restart  the same server restarted RUNS times (default 5) on its data:
#            time from exec to the first 200 of /readyz (.ci/readytime polls
#            every millisecond) and the CPU time the server used until then,
#            then once more after a SIGKILL (a crash: the database check
#            then walks every page of the file, which a clean stop lets it
#            skip), then the restarted server's memory after SETTLE;
#            target: ready within 50 ms.
#   member   a three-member cluster on loopback, LEASES leases written
#            through member 1, then every member idle for MEMBER_SETTLE
#            (default 10m); target: RssAnon at most 30 MB.
#
# Memory is read from /proc/PID/status (RssAnon, VmHWM) and
# /proc/PID/smaps_rollup (Pss, Pss_Anon), in MiB. The mmapped database is
# file-backed: it counts in Pss, not in RssAnon. Start time depends on the
# machine's load, so each figure is printed with the load average; memory
# does not. SERVER_FLAGS adds serve flags, SERVER_BIN runs another build,
# SERVER_ENV sets the server's environment (e.g. SERVER_ENV=GOGC=50).
# PROFILE=DIR (member mode) serves each member's Go profiles on
# 127.0.0.1:PORT+10i+3 and saves its heap profile (mI.heap, and the text
# form with the runtime's MemStats, mI.status) into DIR when measured.
# Needs: go, curl, jq.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
BIN=$WORK/leasehold
go build -o "$BIN" .
go build -o "$WORK/readytime" ./.ci/readytime
SRV=${SERVER_BIN:-$BIN}
LEASES=${LEASES:-10000}
SETTLE=${SETTLE:-7m}
MEMBER_SETTLE=${MEMBER_SETTLE:-10m}
RUNS=${RUNS:-5}
PORT=${PORT:-27511}

PIDS=()
# ours PID: the process is still one of our servers (its command line
# names $WORK), not a process that reused the number of one that ended.
ours() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -q -- "$WORK"; }

cleanup() {
	for p in "${PIDS[@]}"; do if ours "$p"; then kill "$p" 2>/dev/null || true; fi; done
	sleep 1
	rm -rf "$WORK"
}
trap cleanup EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }

# mem PID: RssAnon, Pss, Pss_Anon and VmHWM in MiB.
mem() {
	if ! ours "$1"; then
		echo "server $1 is gone; the end of its log:" >&2
		tail -n 20 "$WORK"/*.log >&2
		exit 1
	fi
	awk '/^RssAnon:/{printf "RssAnon %.1f  ", $2/1024}' "/proc/$1/status"
	awk '/^Pss:/{p=$2} /^Pss_Anon:/{a=$2} END{printf "Pss %.1f  Pss_Anon %.1f  ", p/1024, a/1024}' "/proc/$1/smaps_rollup"
	awk '/^VmHWM:/{printf "VmHWM %.1f MiB", $2/1024}' "/proc/$1/status"
}

# stop PID: SIGTERM and wait until it is gone (it may not be our child).
stop() {
	ours "$1" || return 0
	kill "$1" 2>/dev/null || return 0
	for _ in $(seq 600); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	echo "server $1 did not stop in 60 s" >&2
	exit 1
}

# start NAME PORT ARGS...: starts a server through readytime; sets PID, MS
# (exec to ready, wall clock) and CPU (the server's CPU time until then).
start() {
	local name=$1 port=$2
	shift 2
	local out
	# shellcheck disable=SC2086
	out=$(env ${SERVER_ENV:-} "$WORK/readytime" -url "http://127.0.0.1:$port" -log "$WORK/$name.log" -- \
		"$SRV" serve --listen "127.0.0.1:$port" --log-level warn --write-kubeconfig - "$@" ${SERVER_FLAGS:-})
	read -r PID MS CPU <<<"$out"
	PIDS+=("$PID")
}

# fill URL: creates LEASES leases (bench's setup, then one renewal each).
fill() {
	"$BIN" bench --server "$1" --leases "$LEASES" --clients 64 --rate 0 --warmup 0s --duration 1s \
		--output json >"$WORK/fill.json" 2>>"$WORK/bench.log"
}

single() {
	start single "$PORT" --data-dir "$WORK/single"
	fill "http://127.0.0.1:$PORT"
	echo "single: $LEASES leases, idle $SETTLE: load before $(load)"
	sleep "$SETTLE"
	echo "single: $(mem "$PID") (target RssAnon <= 15 MB), load $(load)"
	SINGLE_PID=$PID
}

restart() {
	if [ -z "${SINGLE_PID:-}" ]; then
		start single "$PORT" --data-dir "$WORK/single"
		fill "http://127.0.0.1:$PORT"
		SINGLE_PID=$PID
	fi
	local times=() cpus=()
	for run in $(seq "$RUNS"); do
		stop "$SINGLE_PID"
		local before
		before=$(load)
		start single "$PORT" --data-dir "$WORK/single"
		SINGLE_PID=$PID
		times+=("$MS") cpus+=("$CPU")
		echo "restart $run: ready after ${MS} ms (${CPU} ms of CPU) with $LEASES leases (target <= 50 ms), load before $before"
	done
	echo "restart: median $(median "${times[@]}") ms, $(median "${cpus[@]}") ms of CPU, of $RUNS"
	# Each stop above was clean, so each start skipped the page walk of
	# the database check; after a SIGKILL the check walks every page.
	if ours "$SINGLE_PID"; then kill -9 "$SINGLE_PID"; fi
	while ours "$SINGLE_PID"; do sleep 0.1; done
	local before
	before=$(load)
	start single "$PORT" --data-dir "$WORK/single"
	SINGLE_PID=$PID
	echo "restart after SIGKILL: ready after ${MS} ms (${CPU} ms of CPU), every page of the file checked, load before $before"
	sleep "$SETTLE"
	echo "restarted, idle $SETTLE: $(mem "$SINGLE_PID"), load $(load)"
	stop "$SINGLE_PID"
}

member() {
	local pids=() i
	for i in 1 2 3; do
		local port=$((PORT + 10 * i)) args=(--data-dir "$WORK/m$i" --member-name "m$i"
			--peer-listen "127.0.0.1:$((PORT + 10 * i + 2))" --cluster-client-listen "127.0.0.1:$((PORT + 10 * i + 1))"
			--cluster-token footprint-measurement-cluster-token)
		if [ "$i" = 1 ]; then args+=(--cluster-init); else args+=(--join "http://127.0.0.1:$((PORT + 10))"); fi
		if [ -n "${PROFILE:-}" ]; then args+=(--profiling-listen "127.0.0.1:$((PORT + 10 * i + 3))"); fi
		start "m$i" "$port" "${args[@]}"
		pids+=("$PID")
	done
	fill "http://127.0.0.1:$((PORT + 10))"
	echo "member: $LEASES leases through m1, idle $MEMBER_SETTLE: load before $(load)"
	sleep "$MEMBER_SETTLE"
	for i in 1 2 3; do
		echo "member m$i: $(mem "${pids[i-1]}") (target RssAnon <= 30 MB), load $(load)"
		if [ -n "${PROFILE:-}" ]; then
			curl -fsS -o "$PROFILE/m$i.heap" "http://127.0.0.1:$((PORT + 10 * i + 3))/debug/pprof/heap"
			curl -fsS -o "$PROFILE/m$i.status" "http://127.0.0.1:$((PORT + 10 * i + 3))/debug/pprof/heap?debug=1"
		fi
	done
	for p in "${pids[@]}"; do stop "$p"; done
}

for mode in ${@:-single restart member}; do
	case $mode in
	single | restart | member) "$mode" ;;
	*) echo "unknown mode $mode (single, restart or member)" >&2; exit 2 ;;
	esac
done
