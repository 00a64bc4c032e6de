# syntax=docker/dockerfile:1
# hubproxy: one static binary on distroless, running as uid 65532.
#   docker build -t hubproxy .
#   docker run --rm -p 8080:8080 -v hubproxy-cache:/var/cache/hubproxy hubproxy
# Without a Docker daemon, `make image` builds the same image as an OCI layout
# (deploy/image); a test keeps the two in agreement.
# The GPU-staging variant is Dockerfile.cuda.

# Build on the build host's platform and cross-compile: pure Go, no cgo.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
# Modules first, so a source change does not refetch them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/hubproxy ./cmd/hubproxy
# Directories the nonroot user must own: the cache root and the admin socket's
# directory (distroless has no shell to create them later).
RUN mkdir -p /out/var/cache/hubproxy /out/run/hubproxy

# static-debian12 carries CA certificates, tzdata and /etc/passwd with the
# "nonroot" user (65532), and nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hubproxy /hubproxy
COPY --from=build --chown=65532:65532 /out/var/cache/hubproxy /var/cache/hubproxy
COPY --from=build --chown=65532:65532 /out/run/hubproxy /run/hubproxy
# The environment wins over a config file: the Helm chart sets this variable
# itself to the path its cache volume is mounted at.
ENV HUBPROXY_CACHE_DIR=/var/cache/hubproxy
USER 65532:65532
EXPOSE 8080
# The binary alone is the entrypoint and `serve` the default command, so a
# Kubernetes pod's args (which replace CMD) name the subcommand: the Helm chart
# passes [serve, --config=...]; `docker run IMAGE cache du` works too.
ENTRYPOINT ["/hubproxy"]
CMD ["serve"]
