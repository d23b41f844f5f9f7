#!/usr/bin/env bash
# Builds oldest-binary-version.wasm from source with the AssemblyScript
# compiler pinned in package-lock.json (npm ci installs exactly that).
#   ./build.sh [OUT.wasm]        (default: oldest-binary-version.wasm here)
set -euo pipefail
cd "$(dirname "$0")"
out=$(realpath -m "${1:-oldest-binary-version.wasm}")
npm ci --no-audit --no-fund --loglevel=error
# --runtime stub: a bump allocator; the host throws each instance away after
# one decision, so nothing needs freeing. --use abort=: no env.abort import
# (the sandbox allows only lease_strategy and a few WASI functions).
npx asc assembly/index.ts -o "$out" -O3 --runtime stub --use abort= --noAssert
