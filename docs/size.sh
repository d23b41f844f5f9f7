#!/usr/bin/env bash
# Where the bytes of the leasehold binary go. Builds the release binary
# (.ci/build, as the Dockerfile and make dist: static, -trimpath, stripped)
# and the same build with its symbols, prints the stripped size, then the
# sections and the symbols summed by module and package (go run ./.ci/size
# on the build with symbols).
#
#   docs/size.sh                      amd64
#   GOARCH=arm64 docs/size.sh
#   GOARCH=arm GOARM=7 docs/size.sh
#   PACKAGES=100 docs/size.sh         more packages (default 40; 0 = all)
#
# docs/dependencies.md's size table comes from this script. Last, it lists any
# function that turns off the linker's removal of unused methods.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export CGO_ENABLED=0 GOOS=linux
arch=$(go env GOARCH)
# The release build (.ci/build: the patched dependencies, grpcnotrace).
.ci/build "$out/leasehold"
LDFLAGS= .ci/build "$out/leasehold.unstripped"
size=$(stat -c %s "$out/leasehold")
printf 'stripped linux/%s%s binary: %d bytes (%.2f MiB; the CI limit is 40 MiB)\n\n' \
	"$arch" "${GOARM:+v$GOARM}" "$size" "$(echo "$size / 1048576" | bc -l)"
# The tool runs on this machine, whatever GOARCH the binary is for.
GOARCH= GOARM= go run ./.ci/size -packages "${PACKAGES:-40}" "$out/leasehold.unstripped"

# A function that looks methods up by reflection with a name that is not a
# constant (text/template's evaluator, reflect.Type.Method) makes the linker
# keep every exported method of every type: about 8 MiB here. List any that
# the build reaches; `go build -ldflags=-dumpdep` shows who reaches them.
echo
echo "reachable functions that keep every exported method (docs/dependencies.md, \"Binary size\"):"
found=$(LDFLAGS=-dumpdep .ci/build "$out/leasehold.dumpdep" 2>&1 >/dev/null |
	grep -o '[^ ]* <ReflectMethod>' | sed 's/ <ReflectMethod>$//' | sort -u || true)
echo "${found:-none}"
