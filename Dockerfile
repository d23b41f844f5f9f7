# syntax=docker/dockerfile:1
# Build: docker build -t leasehold .
# Run:   docker run -p 8080:8080 -v leasehold-data:/data leasehold

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# A static, CGO-free binary: .ci/run runs this exact line and checks the result.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/leasehold .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leasehold /usr/local/bin/leasehold
# The database and generated kubeconfig live on this volume.
VOLUME /data
ENV LEASEHOLD_DATA_DIR=/data \
    LEASEHOLD_LISTEN=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/leasehold"]
CMD ["serve"]
