# hubproxy: the two commands a new user needs are `make run` and `make test`.
GO ?= go
BIN := bin/hubproxy
# Packages whose tests exercise concurrency run under the race detector; that is all of them.
TEST_FLAGS ?= -race -timeout 15m
# The root module is the product. The soak, the benchmarks and the chart and
# image tooling are modules of their own (each go.mod replaces
# github.com/hubproxy/hubproxy with this directory, so they use its internal
# packages): k8s.io and go-containerregistry stay out of the product's
# go.mod. lint and test cover every module.
TOOL_MODULES := soak bench deploy

.PHONY: all build build-cuda run demo test lint e2e-deps clean

all: build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION) -X main.buildCommit=$(shell git rev-parse HEAD 2>/dev/null)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/hubproxy

# build-cuda: GPU staging; needs gcc, not the CUDA toolkit.
build-cuda:
	CGO_ENABLED=1 $(GO) build -tags cuda -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/hubproxy

# image: the static image (Dockerfile's, without a Docker daemon) as an OCI
# image layout in $(IMAGE_DIR); push it with any OCI tool, e.g.
# skopeo copy oci:$(IMAGE_DIR):$(VERSION) docker://REGISTRY/hubproxy:$(VERSION)
IMAGE_DIR ?= bin/image
IMAGE_TOOL := bin/imagebuild
.PHONY: image
image: build
	$(GO) -C deploy build -o $(abspath $(IMAGE_TOOL)) ./image
	./$(IMAGE_TOOL) -bin $(BIN) -out $(IMAGE_DIR) -tag $(VERSION)

run: build
	./$(BIN) serve

# demo: a small synthetic model served offline, with curl lines to try.
demo: build
	./$(BIN) demo

# MinIO, the real S3 server the shared-store tests run against: built from
# the Go module proxy into .tools/ (git-ignored, cached by version; about two
# minutes on 2 cores), never a dependency in go.mod. The version must match
# internal/sharedstore/miniotest.Version (a test checks).
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO := .tools/minio-$(MINIO_VERSION)/minio

.PHONY: minio
minio: $(MINIO)

$(MINIO):
	@echo "building MinIO $(MINIO_VERSION) for the shared-store tests (once per version)"
	rm -rf $(@D).tmp
	GOBIN=$(CURDIR)/$(@D).tmp CGO_ENABLED=0 GOFLAGS=-buildvcs=false $(GO) install github.com/minio/minio@$(MINIO_VERSION)
	rm -rf $(@D) && mv $(@D).tmp $(@D)

# s5cmd, a real S3 client the S3 API's end-to-end test (test/e2e, TestS5cmd)
# drives: built from the Go module proxy into .tools/ (git-ignored, cached by
# version), never a dependency in go.mod. Its go.mod has replace directives,
# which `go install pkg@version` refuses, so a throwaway module builds it.
S5CMD_VERSION := v2.3.0
S5CMD := .tools/s5cmd-$(S5CMD_VERSION)/s5cmd

.PHONY: s5cmd
s5cmd: $(S5CMD)

$(S5CMD):
	@echo "building s5cmd $(S5CMD_VERSION) for the S3 API's end-to-end test (once per version)"
	rm -rf .tools/s5cmd-src
	mkdir -p .tools/s5cmd-src
	cd .tools/s5cmd-src && GOWORK=off GOFLAGS=-buildvcs=false $(GO) mod init x && \
	  GOWORK=off GOFLAGS=-buildvcs=false $(GO) get github.com/peak/s5cmd/v2@$(S5CMD_VERSION) && \
	  GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 $(GO) build -o $(CURDIR)/$(S5CMD).tmp github.com/peak/s5cmd/v2
	mv $(S5CMD).tmp $(S5CMD)
	rm -rf .tools/s5cmd-src

# test is what CI runs (.ci/run): static checks, the npm clients for the
# end-to-end tests, MinIO for the shared-store tests and s5cmd for the S3
# API's, then every Go test of every module with -race.
test: lint e2e-deps minio s5cmd
	HUBPROXY_MINIO=$(CURDIR)/$(MINIO) HUBPROXY_S5CMD=$(CURDIR)/$(S5CMD) $(GO) test $(TEST_FLAGS) ./...
	@set -e; for m in $(TOOL_MODULES); do \
	  echo "go test $(TEST_FLAGS) ./... (module $$m)"; \
	  HUBPROXY_MINIO=$(CURDIR)/$(MINIO) $(GO) -C $$m test $(TEST_FLAGS) ./...; \
	done
	# The cgo CUDA copier against a fake driver built from C in the test.
	$(GO) test $(TEST_FLAGS) -tags cuda ./internal/gpu/
	$(GO) test $(TEST_FLAGS) -tags cuda -run 'GPUBench|GPUServe|GPUVMM' ./cmd/hubproxy/
	# The GPU check script, up to the device boundary (fake driver).
	$(MAKE) gpu-check-dry
	# Two minutes of chaos against real hubproxy processes (soak/soak.mk).
	$(MAKE) soak-ci

# lint: gofmt over every tracked Go file, then in each module (the root
# first) go.mod/go.sum tidy, go vet and a static build.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in . $(TOOL_MODULES); do \
	  $(GO) -C $$m mod tidy -diff >/dev/null || { echo "$$m/go.mod, go.sum are not tidy; run 'go -C $$m mod tidy'"; $(GO) -C $$m mod tidy -diff; exit 1; }; \
	done
	$(GO) vet ./...
	$(GO) vet -tags cuda ./...
	CGO_ENABLED=0 $(GO) build ./...
	@set -e; for m in $(TOOL_MODULES); do \
	  echo "go vet ./... && CGO_ENABLED=0 go build ./... (module $$m)"; \
	  $(GO) -C $$m vet ./...; \
	  CGO_ENABLED=0 $(GO) -C $$m build ./...; \
	done

e2e-deps:
	cd test/e2e && npm ci --no-audit --no-fund --loglevel=error

clean:
	rm -rf bin test/e2e/node_modules

# helm-check: lint and render the chart with helm itself (also run by go test).
include deploy/helm.mk

# bench, bench-quick: hubproxy against nginx (slice cache) and direct downloads.
include bench/bench.mk

# soak, soak-ci: hubproxy under hostile traffic, checked by an oracle.
include soak/soak.mk

# gpu-check: GPU staging measured on a real GPU (scripts/gpu-check.sh), one
# command for a machine with an NVIDIA GPU; gpu-check-dry runs the same script
# against the fake driver, as CI does. gpu-check-prep builds the binaries it
# needs on a machine with Go, for a GPU machine without it.
.PHONY: gpu-check gpu-check-dry gpu-check-prep
gpu-check:
	scripts/gpu-check.sh
gpu-check-dry:
	scripts/gpu-check.sh --dry-run --out $${GPU_CHECK_OUT:-$$(mktemp -d /tmp/gpu-check-dry.XXXXXX)}
# gpu-check-prep: stripped, -trimpath binaries for a GPU machine without Go
# (bin/ travels with the source: keep it under 64 MiB), then the sizes and the
# highest GLIBC_ symbol version each needs: a device on Ubuntu 22.04 has
# glibc 2.35, so anything above GLIBC_2.35 fails the target.
gpu-check-prep:
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags "-s -w" -tags cuda -o bin/hubproxy-cuda ./cmd/hubproxy
	CGO_ENABLED=1 $(GO) test -c -trimpath -ldflags "-s -w" -tags cuda -o bin/gpu-cuda.test ./internal/gpu
	@du -b bin/hubproxy-cuda bin/gpu-cuda.test; du -cb bin/hubproxy-cuda bin/gpu-cuda.test | awk 'END { printf "total %.1f MiB\n", $$1/1048576; if ($$1 > 64*1048576) { print "bin/ over 64 MiB"; exit 1 } }'
	@for b in bin/hubproxy-cuda bin/gpu-cuda.test; do \
	  v=$$(objdump -T $$b | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1); echo "$$b needs at most $$v"; \
	  [ "$$(printf '%s\n' "$$v" GLIBC_2.35 | sort -V | tail -1)" = GLIBC_2.35 ] || { echo "$$b needs $$v, above GLIBC_2.35"; exit 1; }; \
	done
