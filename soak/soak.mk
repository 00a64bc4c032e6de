# Soak: included from the top-level Makefile (`include soak/soak.mk`).
# `make soak` runs hubproxy under ten minutes of hostile traffic against an
# oracle (soak/doc.go says what it checks) and prints the figures the README's
# Reliability section quotes; `make soak-ci` is the two-minute variant that
# `make test` runs. Both need root (each hubproxy caches on a tmpfs of its own,
# which the chaos fills). Extra flags go in SOAK_FLAGS, e.g.
# `make soak SOAK_FLAGS='-seed 42 -duration 3m'` to replay a failed run's
# schedule; `make soak-bin && bin/soak -h` lists them (soak/ is a Go module
# of its own; bin/soak runs from the repository root, where its defaults
# point). It uses the Makefile's `build` target and its GO and BIN variables,
# and its `minio` target and MINIO variable: the proxies share one real MinIO
# store, built and found the way `make test` builds and finds it.
SOAK_BIN := bin/soak
SOAK_FLAGS ?=

.PHONY: soak soak-ci soak-bin

soak-bin: build
	$(GO) -C soak build -o $(abspath $(SOAK_BIN)) ./cmd/soak

soak: soak-bin minio
	./$(SOAK_BIN) -hubproxy $(BIN) -minio $(CURDIR)/$(MINIO) $(SOAK_FLAGS)
	$(GO) test -race -timeout 30m -run 'TestAccessModel$$' ./internal/app/ -args -model.steps=2000 -model.seeds=4 -model.random

soak-ci: soak-bin minio
	./$(SOAK_BIN) -hubproxy $(BIN) -minio $(CURDIR)/$(MINIO) -duration 2m $(SOAK_FLAGS)
