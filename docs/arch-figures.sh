#!/usr/bin/env bash
# The README's per-architecture figures: binary size, and the server's idle
# RSS and CPU over one minute while 1,000 leases are renewed every 10 s
# (100 renewals/s), natively on this machine's architecture and under
# qemu-user for the others (the ARM figures then include the emulator's
# own cost: they bound, not predict, a real device).
#
#   docs/arch-figures.sh [amd64|arm64|armv7 ...]     (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(amd64 arm64 armv7)
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill $server 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/leasehold-native" .
for arch in "${archs[@]}"; do
	case $arch in
	amd64) goarch=amd64 goarm= qemu= ;;
	arm64) goarch=arm64 goarm= qemu=qemu-aarch64-static ;;
	armv7) goarch=arm goarm=7 qemu=qemu-arm-static ;;
	*) echo "unknown architecture $arch" >&2; exit 2 ;;
	esac
	bin=$work/leasehold-$arch
	GOOS=linux GOARCH=$goarch GOARM=$goarm bash .ci/build "$bin"  # the release build
	rm -f "$work/ready"
	$qemu "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data-$arch" --ready-file "$work/ready" \
		--log-level warn --write-kubeconfig - >"$work/server-$arch.log" 2>&1 &
	server=$!
	for _ in $(seq 600); do [ -s "$work/ready" ] && break; sleep 0.1; done
	url=$(cat "$work/ready")
	# Create the leases, then one minute at 100 renewals/s.
	"$work/leasehold-native" bench --server "$url" --leases 1000 --clients 8 --duration 1s --warmup 0s --rate 200 >/dev/null
	report=$("$work/leasehold-native" bench --server "$url" --leases 1000 --clients 8 --no-setup \
		--duration 60s --warmup 5s --rate 100 --server-pid "$server" --output json)
	rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' /proc/$server/status)
	cpu=$(awk '{printf "%.2f", ($14+$15)/100}' /proc/$server/stat)
	size=$(stat -c %s "$bin")
	echo "$arch${qemu:+ (qemu-user)}: binary $((size / 1024 / 1024)) MiB; after 1 min of 100 renewals/s on 1,000 leases: RSS $rss MB, total server CPU ${cpu}s since start; bench: $report" | tee -a "$work/summary"
	kill "$server"; wait "$server" 2>/dev/null || true; server=
done
