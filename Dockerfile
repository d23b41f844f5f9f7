# syntax=docker/dockerfile:1
# Build: docker build -t leasehold .
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64,linux/arm/v7 -t leasehold .
# Run:   docker run -p 8443:8443 -v leasehold-data:/data \
#          -v $PWD/tokens.csv:/etc/leasehold/tokens.csv:ro leasehold
# The server listens off loopback, so it is secure by default: HTTPS with a
# CA generated into /data/pki on first start, and bearer tokens from the
# mounted token file (kube-apiserver's token,user,uid,"groups" CSV; mount it
# as a secret). /data/kubeconfig then holds the CA and the file's first token.

# The build stage runs on the builder's own platform and cross-compiles
# (pure Go, no cgo), so a multi-arch build needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ARG TARGETOS=linux TARGETARCH=amd64 TARGETVARIANT=""
WORKDIR /src
COPY go.mod go.sum ./
# The strategy contract and Go SDK are nested modules that go.mod replaces
# with these directories: their go.mod files are needed to download.
COPY plugins/abi/go.mod plugins/abi/
COPY plugins/sdk/go.mod plugins/sdk/
RUN go mod download
COPY . .
# A static, CGO-free, stripped binary for the target platform (GOARM=7 from
# linux/arm/v7), built by .ci/build with its two dependency patches (the
# binary's size, docs/dependencies.md): .ci/test runs this exact line for
# each platform and checks the result.
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH GOARM=${TARGETVARIANT#v} bash .ci/build /out/leasehold

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leasehold /usr/local/bin/leasehold
# The database, generated certificates and kubeconfig live on this volume.
VOLUME /data
ENV LEASEHOLD_DATA_DIR=/data \
    LEASEHOLD_LISTEN=0.0.0.0:8443 \
    LEASEHOLD_TOKEN_AUTH_FILE=/etc/leasehold/tokens.csv \
    LEASEHOLD_LOG_FORMAT=json \
    LEASEHOLD_SHUTDOWN_DELAY_DURATION=1s
EXPOSE 8443
USER nonroot:nonroot
# Distroless has no curl: the binary probes its own /readyz (reading
# LEASEHOLD_LISTEN and the CA in LEASEHOLD_DATA_DIR).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/leasehold", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/leasehold"]
CMD ["serve"]
