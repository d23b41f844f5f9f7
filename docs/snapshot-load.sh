#!/usr/bin/env bash
# What scheduled snapshots cost a busy cluster (docs/cluster.md "Scheduled
# snapshots"): three members on loopback hold a database of about SIZE_MB
# (large leases), then `leasehold bench` renews small leases on member 1
# for DURATION three times: with no snapshots, with every member taking
# snapshots back to back (--snapshot-interval 5s, paced and at the idle
# I/O priority, as by default), and with them unpaced
# (--snapshot-bytes-per-sec 0). For each: renewal p50/p99/max, raft leader
# elections, and etcd's "leader failed to send out heartbeat on time" and
# "slow fdatasync" warnings in the members' logs.
#
#   docs/snapshot-load.sh        # SIZE_MB=200 DURATION=40s PHASES="none paced unpaced"
#
# Needs: go, curl, jq, python3, openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-200}
DURATION=${DURATION:-40s}
WORK=$(mktemp -d)
BIN=$WORK/leasehold
go build -o "$BIN" .
BASE=${PORT:-18540}
COMMON=(--log-level info --write-kubeconfig - --cluster-request-timeout 10s --storage-quota-bytes $((2 << 30)) --cluster-large-write-bytes-per-sec 0)

PIDS=()
start_members() { # extra serve flags
	rm -f "$WORK"/*.url
	local join=""
	for i in 1 2 3; do
		local args=()
		if [ ! -e "$WORK/d$i" ]; then
			args=(--cluster-init --cluster-token-file "$WORK/token")
			[ -n "$join" ] && args=(--join "$join" --cluster-token-file "$WORK/token")
		fi
		"$BIN" serve "${args[@]}" --data-dir "$WORK/d$i" --listen 127.0.0.1:$((BASE + i)) \
			--peer-listen 127.0.0.1:$((BASE + 100 * i + 1000)) --member-name "m$i" --ready-file "$WORK/d$i.url" \
			"${COMMON[@]}" "$@" >>"$WORK/m$i.log" 2>&1 &
		PIDS+=($!)
		# A restart waits for the others (no quorum alone); a join for
		# the member it joins.
		[ ${#args[@]} -eq 0 ] || wait_ready "$i"
		join=http://127.0.0.1:$((BASE + i))
	done
	for i in 1 2 3; do wait_ready "$i"; done
}
wait_ready() {
	for _ in $(seq 1800); do [ -e "$WORK/d$1.url" ] && return; sleep 0.1; done
	echo "member m$1 did not start" >&2
	tail -20 "$WORK/m$1.log" >&2
	exit 1
}
stop_members() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
trap 'stop_members; rm -rf "$WORK"' EXIT
(umask 077; openssl rand -hex 32 >"$WORK/token")

start_members --snapshot-interval 0
echo "filling the database with ${SIZE_MB} MB of large leases"
python3 - "$SIZE_MB" "http://127.0.0.1:$((BASE + 1))" <<'PY'
import json, sys, urllib.request, urllib.error, concurrent.futures
mb, url = int(sys.argv[1]), sys.argv[2]
pad = "x" * (60 << 10)  # under 64 KiB: not a "large value", which the quota bounds to a quarter
def put(i):
    body = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": f"big-{i:05d}", "annotations": {"pad": pad}}, "spec": {"holderIdentity": "filler"}}).encode()
    req = urllib.request.Request(url + "/apis/coordination.k8s.io/v1/namespaces/default/leases", data=body,
        headers={"Content-Type": "application/json"}, method="POST")
    for attempt in range(5):
        try:
            urllib.request.urlopen(req, timeout=60).read()
            return
        except urllib.error.HTTPError as e:
            if e.code == 409:
                return
            err = f"{e.code} {e.read()[:300]!r}"
    raise SystemExit(f"create big-{i:05d}: {err}")
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    list(ex.map(put, range(mb * 17)))
PY
du -sh "$WORK"/d1/cluster 2>/dev/null || true

phase() { # name, then serve flags for the restart
	local name=$1
	shift
	stop_members
	start_members "$@"
	sleep 8 # the first snapshot is due 5 s after the start
	for _ in $(seq 300); do # and a raft leader, after the restart
		curl -fsS -o /dev/null "http://127.0.0.1:$((BASE + 1))/readyz" 2>/dev/null && break
		sleep 0.2
	done
	local lines=()
	for i in 1 2 3; do lines+=("$(wc -l <"$WORK/m$i.log")"); done
	"$BIN" bench --server "http://127.0.0.1:$((BASE + 1))" --clients 16 --leases 200 --warmup 2s --duration "$DURATION" \
		--output json --prefix "renew" >"$WORK/$name.json" || true
	local hb=0 elections=0 fsync=0 snaps=0
	for i in 1 2 3; do
		local tail
		tail=$(tail -n +"$((lines[i - 1] + 1))" "$WORK/m$i.log")
		hb=$((hb + $(grep -c 'failed to send out heartbeat on time' <<<"$tail" || true)))
		elections=$((elections + $(grep -c 'elected leader' <<<"$tail" || true)))
		fsync=$((fsync + $(grep -c 'slow fdatasync' <<<"$tail" || true)))
		snaps=$((snaps + $(grep -c 'Wrote a snapshot' <<<"$tail" || true)))
	done
	jq -c --arg phase "$name" --argjson hb "$hb" --argjson el "$elections" --argjson fs "$fsync" --argjson sn "$snaps" \
		'{phase: $phase, renewals_per_sec, errors, p50_ms: .latency.p50_ms, p99_ms: .latency.p99_ms, max_ms: .latency.max_ms,
		  snapshots_written: $sn, leader_elections: $el, late_heartbeat_warnings: $hb, slow_fdatasync_warnings: $fs}' "$WORK/$name.json"
	grep -h 'Wrote a snapshot' "$WORK"/m*.log | tail -n 1 || true
}
PHASES=${PHASES:-none paced unpaced}
for p in $PHASES; do
	case $p in
	none) phase none --snapshot-interval 0 ;;
	paced) phase paced --snapshot-interval 5s --snapshot-min-free-bytes 0 ;;
	unpaced) phase unpaced --snapshot-interval 5s --snapshot-min-free-bytes 0 --snapshot-bytes-per-sec 0 ;;
	esac
done
