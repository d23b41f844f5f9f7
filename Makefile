# leasehold's developer entry points. The README's two commands:
#   go run .     the server on its embedded defaults
#   make test    every test, after installing what the tests need
# .ci/run (CI) runs `make test`.

GO        ?= go
# The one version (binary, /version and the UI, tarballs, packages) comes
# from the VERSION file: v0.1.0 on the commit tagged v0.1.0,
# v0.1.0-dev+<commit> elsewhere (.ci/version). `make dist VERSION=v9.9.9`
# overrides it.
VERSION   ?= $(shell bash .ci/version)
# Tarball and package file times: the commit's, so dist is reproducible.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 946684800)
LDFLAGS    = -s -w
DIST      ?= dist
# The release architectures (GOARCH; arm is built with GOARM=7, Debian armhf).
ARCHES     = amd64 arm64 arm

.PHONY: all build test test-busy test-short deps dist verify-dist sign release-key repo pkg-test release-test arm-test fault-suite clean help

all: build

help:
	@echo "make build        build ./leasehold for this machine"
	@echo "make test         install test dependencies (Debian, as root) and run every test"
	@echo "make test-short   the fast tier: go test -short, as any user, with Go alone (skips what needs a tool, root or minutes)"
	@echo "make test-busy    make test beside two CPU burners (.ci/busy): the suite must hold on a busy machine"
	@echo "make deps         only install the test dependencies"
	@echo "make fault-suite  the cluster fault-injection suite (process, disk and network faults) on a randomized schedule (root; LEASEHOLD_FAULT_DURATION, default 10m)"
	@echo "make arm-test     run the core packages' tests and an end-to-end smoke on arm64 and armv7 under qemu"
	@echo "make dist         static binaries, tarballs, .deb, .rpm and .apk packages and SBOMs for amd64, arm64, armhf in $(DIST)/"
	@echo "make verify-dist  check what make dist wrote"
	@echo "make sign         sign $(DIST)/SHA256SUMS with the Ed25519 release key (LEASEHOLD_RELEASE_KEY=key.pem)"
	@echo "make release-key  make an Ed25519 release key (LEASEHOLD_RELEASE_KEY=path; writes path and path.pub.pem)"
	@echo "make repo         add $(DIST)/'s .deb files to the static apt repository $(REPO)/, signed with gpg (LEASEHOLD_REPO_KEY=key id)"
	@echo "make pkg-test     install, start, upgrade, remove and purge the amd64 .deb in a throwaway Debian root (root; downloads Debian)"
	@echo "make release-test apt install and apt-get upgrade from make repo in a debootstrap root, .rpm and .apk install, upgrade and remove (root; downloads Debian; minutes)"

build:
	GO="$(GO)" LDFLAGS="$(LDFLAGS)" LEASEHOLD_VERSION="$(VERSION)" bash .ci/build leasehold

deps:
	bash .ci/deps

test: deps
	bash .ci/test

# The whole suite beside two CPU burners (.ci/busy): it must pass there too.
test-busy: deps
	bash .ci/busy bash .ci/test

# The fast tier: passes as any user on a machine with Go alone, in a few
# minutes. A test that needs a missing tool (Chromium, kubectl, etcd, clang,
# wabt, npm, a wasm32 rustc), root or minutes of machine time is skipped
# and says what it needs (internal/testneeds); make test skips nothing.
# The nested modules (plugins/abi, plugins/sdk) run in place, as in .ci/test.
test-short:
	$(GO) test -short ./...
	set -e; for m in plugins/abi plugins/sdk; do (cd $$m && $(GO) test -short ./...); done

# All four core packages on both architectures (CI runs them on armv7 and
# the WASM host's on arm64: .ci/arm-test says why).
arm-test:
	LEASEHOLD_ARM_ALL_PACKAGES=1 bash .ci/arm-test

# The long run of web/e2e's TestClusterFaults: after each fault once (as in
# CI), random faults for LEASEHOLD_FAULT_DURATION; LEASEHOLD_FAULT_SEED
# replays a schedule (the test logs its seed). Root: it mounts a tmpfs.
LEASEHOLD_FAULT_DURATION ?= 10m
# TestClusterHandoffs' kills of the etcd leader's and the election
# controller's member, repeated for figures with a spread.
LEASEHOLD_HANDOFF_ROUNDS ?= 10
fault-suite:
	LEASEHOLD_FAULT_DURATION=$(LEASEHOLD_FAULT_DURATION) LEASEHOLD_HANDOFF_ROUNDS=$(LEASEHOLD_HANDOFF_ROUNDS) $(GO) test -count=1 -timeout 0 -v -run '^(TestClusterFaults|TestClusterPartition|TestClusterPartitionReplica|TestClusterHandoffs|TestClusterSlowLeader)$$' ./web/e2e/

# One static binary per architecture (.ci/build), a tarball with the binary,
# license, README and systemd files, .deb, .rpm and .apk packages built by
# nfpm (.ci/package; all with the monitoring rules and dashboard), an SPDX
# SBOM (.ci/sbom), and SHA256SUMS over them; two runs on one commit write
# the same bytes. `make sign` then signs SHA256SUMS. An architecture's
# packages are packed while the next one builds (.ci/build runs one build
# at a time; packing is one core's gzip and nfpm, about 16 s of CPU each).
dist:
	rm -rf $(DIST) && mkdir -p $(DIST)/.bin
	set -e; pids=; rc=0; for arch in $(ARCHES); do \
		GOOS=linux GOARCH=$$arch GOARM=7 GO="$(GO)" LDFLAGS="$(LDFLAGS)" LEASEHOLD_VERSION="$(VERSION)" \
			bash .ci/build $(DIST)/.bin/leasehold-$$arch || { rc=1; break; }; \
		GO="$(GO)" LEASEHOLD_VERSION="$(VERSION)" SOURCE_DATE_EPOCH="$(SOURCE_DATE_EPOCH)" \
			LEASEHOLD_PACKAGE_TOOLS="$${LEASEHOLD_PACKAGE_TOOLS:-$(DIST)/.bin/tools}" \
			bash .ci/package $$arch $(DIST)/.bin/leasehold-$$arch $(DIST) & pids="$$pids $$!"; \
	done; \
	for p in $$pids; do wait $$p || rc=1; done; exit $$rc
	rm -rf $(DIST)/.bin
	cd $(DIST) && sha256sum *.tar.gz *.deb *.rpm *.apk *.spdx.json > SHA256SUMS
	bash .ci/verify-dist $(DIST)

verify-dist:
	bash .ci/verify-dist $(DIST)

# The release key: the maintainers' Ed25519 key (README, "Verify a
# release"); CI signs with one it makes for the run.
LEASEHOLD_RELEASE_KEY ?=
sign:
	bash .ci/sign $(DIST) "$(LEASEHOLD_RELEASE_KEY)"

release-key:
	bash .ci/release-key "$(LEASEHOLD_RELEASE_KEY)"

# The static apt repository (.ci/repo); `make dist repo` again adds a build.
REPO ?= repo
LEASEHOLD_REPO_KEY ?=
repo:
	bash .ci/repo $(DIST) $(REPO) "$(LEASEHOLD_REPO_KEY)"

# Minutes of root and network: not in CI (README, "Install on a device").
release-test:
	bash .ci/release-test

pkg-test:
	bash .ci/pkg-test $(DIST)

clean:
	rm -rf $(DIST) $(REPO) leasehold
