# leasehold's developer entry points. The README's two commands:
#   go run .     the server on its embedded defaults
#   make test    every test, after installing what the tests need
# .ci/run (CI) runs `make test`.

GO        ?= go
# The version comes from the nearest v* tag (leasehold version prints it).
VERSION   ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo v0.0.0-dev+$$(git rev-parse --short HEAD 2>/dev/null || echo unknown))
DEBVER     = $(patsubst v%,%,$(VERSION))
LDFLAGS    = -s -w -X main.Version=$(VERSION)
DIST      ?= dist
# The release architectures (GOARCH; arm is built with GOARM=7, Debian armhf).
ARCHES     = amd64 arm64 arm

.PHONY: all build test test-short deps dist verify-dist pkg-test arm-test fault-suite clean help

all: build

help:
	@echo "make build        build ./leasehold for this machine"
	@echo "make test         install test dependencies (Debian, as root) and run every test"
	@echo "make test-short   the fast tier: go test -short, as any user, with Go alone (skips what needs a tool, root or minutes)"
	@echo "make deps         only install the test dependencies"
	@echo "make fault-suite  the cluster fault-injection suite (process, disk and network faults) on a randomized schedule (root; LEASEHOLD_FAULT_DURATION, default 10m)"
	@echo "make arm-test     run the core packages' tests and an end-to-end smoke on arm64 and armv7 under qemu"
	@echo "make dist         static binaries, tarballs and .deb packages for amd64, arm64, armhf in $(DIST)/"
	@echo "make verify-dist  check what make dist wrote"
	@echo "make pkg-test     install, start, upgrade, remove and purge the amd64 .deb in a throwaway Debian root (root; downloads Debian)"

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="$(LDFLAGS)" -o leasehold .

deps:
	bash .ci/deps

test: deps
	bash .ci/test

# The fast tier: passes as any user on a machine with Go alone, in a few
# minutes. A test that needs a missing tool (Chromium, kubectl, etcd, clang,
# wabt, npm, a wasm32 rustc), root or minutes of machine time is skipped
# and says what it needs (internal/testneeds); make test skips nothing.
# The nested modules (plugins/abi, plugins/sdk) run in place, as in .ci/test.
test-short:
	$(GO) test -short ./...
	set -e; for m in plugins/abi plugins/sdk; do (cd $$m && $(GO) test -short ./...); done

arm-test:
	bash .ci/arm-test

# The long run of web/e2e's TestClusterFaults: after each fault once (as in
# CI), random faults for LEASEHOLD_FAULT_DURATION; LEASEHOLD_FAULT_SEED
# replays a schedule (the test logs its seed). Root: it mounts a tmpfs.
LEASEHOLD_FAULT_DURATION ?= 10m
fault-suite:
	LEASEHOLD_FAULT_DURATION=$(LEASEHOLD_FAULT_DURATION) $(GO) test -count=1 -timeout 0 -v -run '^(TestClusterFaults|TestClusterPartition|TestClusterPartitionReplica)$$' ./web/e2e/

# One static binary per architecture, a tarball with the binary, license,
# README and systemd files, a Debian package built by nfpm, and SHA256SUMS.
dist:
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for arch in $(ARCHES); do \
		deb=$$(case $$arch in arm) echo armhf;; *) echo $$arch;; esac); \
		name=leasehold-$(VERSION)-linux-$$deb; \
		mkdir -p $(DIST)/$$name; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOARM=7 $(GO) build -trimpath -ldflags="$(LDFLAGS)" -o $(DIST)/$$name/leasehold . ; \
		cp -r docs/LICENSE README.md .ci/dist/leasehold.service .ci/dist/leasehold.env docs/monitoring $(DIST)/$$name/; \
		tar -C $(DIST) --owner=0 --group=0 --mtime='2000-01-01 00:00Z' --sort=name -czf $(DIST)/$$name.tar.gz $$name; \
		(cd .ci/dist && $(GO) run . -arch $$arch -version $(VERSION) -binary ../../$(DIST)/$$name/leasehold \
			-out ../../$(DIST)/leasehold_$(DEBVER)_$$deb.deb); \
		rm -rf $(DIST)/$$name; \
	done
	cd $(DIST) && sha256sum *.tar.gz *.deb > SHA256SUMS
	bash .ci/verify-dist $(DIST)

verify-dist:
	bash .ci/verify-dist $(DIST)

pkg-test:
	bash .ci/pkg-test $(DIST)

clean:
	rm -rf $(DIST) leasehold
