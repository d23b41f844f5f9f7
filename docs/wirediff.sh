#!/usr/bin/env bash
# The differential run against kube-apiserver (by hand, never in CI): sends the
# requests of web/testdata/wire/exchanges/requests.json to a live kube-apiserver
# and to leasehold, in order, and prints every answer that differs after
# normalising uids, times and resourceVersions (TestWireExchanges, web).
#
#   docs/wirediff.sh REF_URL REF_TOKEN_FILE [LEASEHOLD_URL [LEASEHOLD_TOKEN_FILE]] [-record]
#
# REF_URL is kube-apiserver v1.37.1 started with --token-auth-file holding
# ref-admin (uid ref-admin-uid, group system:masters) and the
# NamespaceLifecycle admission (its default). Without LEASEHOLD_URL the
# comparison is with an in-process leasehold (--namespace-lifecycle=strict,
# the same user). Each run adds a fresh suffix to the names it creates, so it
# can repeat on the same servers. -record rewrites
# web/testdata/wire/exchanges/recorded.json with kube-apiserver's answers,
# which TestWireExchanges then checks in every test run.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=$1 reftok=$2; shift 2
args=(-wire.ref "$ref" -wire.ref-token "$reftok" -wire.run "-r$(date +%s)")
if [ $# -gt 0 ] && [ "$1" != -record ]; then args+=(-wire.ours "$1"); shift; fi
if [ $# -gt 0 ] && [ "$1" != -record ]; then args+=(-wire.ours-token "$1"); shift; fi
if [ $# -gt 0 ] && [ "$1" = -record ]; then args+=(-wire.record); fi
exec go test -count=1 -v -run '^TestWireExchanges$' ./web -args "${args[@]}"
