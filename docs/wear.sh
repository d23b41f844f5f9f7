#!/usr/bin/env bash
# Flash wear (the README's "Flash wear"): bytes written per lease renewal
# by a single device and by each member of a three-member cluster on
# loopback, under a steady renewal load (default 100 leases renewed every
# 2 s, client-go's retry period: 50 renewals/s, GET then PUT).
#
#   docs/wear.sh [MODE...]        # default: single cluster
#
# For each server process it reports, per renewal over the measured window:
#   write_bytes  /proc/PID/io: bytes of page cache the process dirtied. On
#                kernels whose ext4 uses large folios (6.16 and later) a
#                4 KiB write into a large folio counts the whole folio, so
#                there it overstates what reaches the device.
#   wchar        /proc/PID/io: bytes passed to write system calls, files and
#                sockets alike (HTTP responses, peer and client traffic).
#   device       as root: bytes written to a fresh ext4 file system on a
#                loop device of the process's own (data, journal and
#                metadata; before the card's own write amplification). This
#                is what a card receives; the README's card life uses it.
#
# With the device figure it prints the card life that rate of writes implies
# on a card of CARD_GB gigabytes (default 32) rated for PE program/erase
# cycles (default 3000, TLC) with a write amplification of WAF inside the
# card (default 4), wear-levelled over the whole card: CARD_GB * PE / WAF
# of host writes.
#
# RATE, LEASES, DURATION and WARMUP change the load; SERVER_FLAGS adds serve
# flags (e.g. SERVER_FLAGS=--storage-commit-delay=100ms); SERVER_BIN runs
# another build (for a before/after); LOOP=0 skips the loop devices.
# Needs: go, curl, jq; for the device figure root, losetup and mkfs.ext4.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
BIN=$WORK/leasehold
go build -o "$BIN" .
SRV=${SERVER_BIN:-$BIN}
RATE=${RATE:-50}
LEASES=${LEASES:-100}
DURATION=${DURATION:-60s}
WARMUP=${WARMUP:-10s}
PORT=${PORT:-27411}
CARD_GB=${CARD_GB:-32}
PE=${PE:-3000}
WAF=${WAF:-4}

LOOP=${LOOP:-auto}
if [ "$LOOP" = auto ]; then
	LOOP=0
	[ "$(id -u)" = 0 ] && command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null && LOOP=1
fi

PIDS=() MOUNTS=() LOOPS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || true; done
	for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

# datadir NAME: a directory for one server; as root on its own ext4 file
# system (1 GiB, sparse, every table initialised now so that no background
# initialisation writes during the measurement). Sets DIR and DEV.
datadir() {
	local d=$WORK/$1
	mkdir -p "$d"
	if [ "$LOOP" = 1 ]; then
		truncate -s 1G "$WORK/$1.img"
		mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/$1.img"
		local dev
		dev=$(losetup -f --show "$WORK/$1.img")
		LOOPS+=("$dev")
		mount "$dev" "$d"
		MOUNTS+=("$d")
		DEV=${dev#/dev/}
	else
		DEV=-
	fi
	DIR=$d/data
	mkdir "$DIR"
}

# counters PID DIR DEV: write_bytes wchar device-bytes of one server.
counters() {
	local io dev=0
	io=$(cat "/proc/$1/io")
	if [ "$3" != - ]; then
		sync -f "$2"
		dev=$(( $(awk '{print $7}' "/sys/block/$3/stat") * 512 ))
	fi
	echo "$(awk '/^write_bytes/{print $2}' <<<"$io") $(awk '/^wchar/{print $2}' <<<"$io") $dev"
}

# commits URL: the bbolt store's commits and the writes they carried so far
# (none on a cluster member, whose writes etcd commits).
commits() {
	curl -fsS "$1/metrics" | awk '/^leasehold_storage_commit_duration_seconds_count /{c=$2} /^leasehold_storage_commit_writes_total /{w=$2} END{print c+0, w+0}'
}

wait_ready() { # ready-file log
	for _ in $(seq 1200); do [ -s "$1" ] && curl -fsS "$(cat "$1")/readyz" >/dev/null 2>&1 && return; sleep 0.1; done
	echo "server not ready in 120 s" >&2; cat "$2" >&2; exit 1
}

# run MODE MEMBERS: start the servers, load member 1 through the warm-up,
# then measure.
run() {
	local mode=$1 n=$2 i
	local -a dirs=() devs=() pids=() before=()
	for i in $(seq "$n"); do
		datadir "$mode-m$i"
		local d=$DIR
		dirs+=("$d") devs+=("$DEV")
		local args=(--listen "127.0.0.1:$((PORT + 10 * i))" --data-dir "$d" --ready-file "$WORK/$mode-m$i.ready"
			--log-level warn --write-kubeconfig -)
		if [ "$n" -gt 1 ]; then
			args+=(--member-name "m$i" --peer-listen "127.0.0.1:$((PORT + 10 * i + 2))" --cluster-client-listen "127.0.0.1:$((PORT + 10 * i + 1))"
				--cluster-token wear-measurement-cluster-token)
			if [ "$i" = 1 ]; then args+=(--cluster-init); else args+=(--join "$(cat "$WORK/$mode-m1.ready")"); fi
		fi
		# shellcheck disable=SC2086
		"$SRV" serve "${args[@]}" ${SERVER_FLAGS:-} >"$WORK/$mode-m$i.log" 2>&1 &
		pids+=("$!") PIDS+=("$!")
		wait_ready "$WORK/$mode-m$i.ready" "$WORK/$mode-m$i.log"
	done
	local url
	url=$(cat "$WORK/$mode-m1.ready")
	"$BIN" bench --server "$url" --leases "$LEASES" --clients "$LEASES" --rate "$RATE" \
		--warmup 0s --duration "$WARMUP" --output json >/dev/null 2>>"$WORK/bench.log" || true
	for i in $(seq "$n"); do before+=("$(counters "${pids[i-1]}" "${dirs[i-1]}" "${devs[i-1]}")"); done
	local commits0
	commits0=$(commits "$url")
	"$BIN" bench --server "$url" --server-pid "${pids[0]}" --leases "$LEASES" --clients "$LEASES" --rate "$RATE" \
		--warmup 0s --duration "$DURATION" --output json >"$WORK/$mode.json" 2>>"$WORK/bench.log" || true
	# bench exits 1 after errors or conflicts: they are in its report.
	local renewals
	renewals=$(jq .renewals "$WORK/$mode.json")
	echo "$mode: $renewals renewals in $DURATION ($(jq -r '"\(.renewals_per_sec)/s, p50 \(.latency.p50_ms) ms, p99 \(.latency.p99_ms) ms, \(.errors) errors, \(.conflicts) conflicts"' "$WORK/$mode.json")), load $(cut -d' ' -f1-3 /proc/loadavg)${SERVER_FLAGS:+, flags: $SERVER_FLAGS}"
	local c0 w0 c1 w1
	read -r c0 w0 <<<"$commits0"
	read -r c1 w1 < <(commits "$url")
	# Under load the writer finds more writes queued per commit, so fewer
	# bytes per renewal: this says how far that went.
	[ "$c1" != "$c0" ] && echo "  bbolt: $((c1 - c0)) commits carrying $((w1 - w0)) writes ($(awk -v c=$((c1 - c0)) -v w=$((w1 - w0)) 'BEGIN{printf "%.2f", w/c}') per commit)"
	for i in $(seq "$n"); do
		read -r wb0 wc0 dv0 <<<"${before[i-1]}"
		read -r wb1 wc1 dv1 < <(counters "${pids[i-1]}" "${dirs[i-1]}" "${devs[i-1]}")
		local dev="-" life=""
		if [ "${devs[i-1]}" != - ]; then
			dev=$(( (dv1 - dv0) / renewals ))
			life=$(awk -v b="$dev" -v r="$RATE" -v gb="$CARD_GB" -v pe="$PE" -v waf="$WAF" \
				'BEGIN{d=b*r*86400; printf "; %.1f GB/day, card life %.1f years", d/1e9, gb*1e9*pe/waf/d/365}')
		fi
		printf '  %-7s per renewal: write_bytes %6d  wchar %6d  device %6s bytes%s\n' "m$i" \
			$(( (wb1 - wb0) / renewals )) $(( (wc1 - wc0) / renewals )) "$dev" "$life"
	done
	for p in "${pids[@]}"; do kill "$p"; done
	for p in "${pids[@]}"; do wait "$p" || true; done
	PIDS=()
}

for mode in ${@:-single cluster}; do
	case $mode in
	single) run single 1 ;;
	cluster) run cluster 3 ;;
	*) echo "unknown mode $mode (single or cluster)" >&2; exit 2 ;;
	esac
done
