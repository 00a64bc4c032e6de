# Benchmarks: included from the top-level Makefile (`include bench/bench.mk`).
# `make bench` measures the machine's ceiling and runs every scenario at
# default sizes (about twenty minutes on two cores, half of it the cluster)
# and writes bench/results/<date>-<host>.md; `make bench-quick` runs them at
# tiny sizes in well under a minute. Both install nginx-light and aria2 with
# apt-get when nginx or aria2c is missing and they run as root, and build
# MinIO (make minio) for the cluster scenario. Extra flags go in BENCH_FLAGS,
# e.g. `make bench BENCH_FLAGS='-large 4GiB -bandwidth 100MiB'`;
# `make bench-bin && bin/hubbench -h` lists them; `-only s3` runs the S3 API
# scenario (11) alone. bench/ is a Go module of its
# own; bin/hubbench runs from the repository root, where its defaults point.
# It uses the Makefile's `build` and `minio` targets and its GO, BIN and
# MINIO variables.
BENCH_BIN := bin/hubbench
BENCH_FLAGS ?=

.PHONY: bench bench-quick bench-bin

bench-bin: build
	$(GO) -C bench build -o $(abspath $(BENCH_BIN)) ./cmd/hubbench

# The cluster scenario (10) runs the MinIO the shared-store tests run: the
# Makefile's minio target builds it into .tools/ once per version.
bench: bench-bin minio
	./$(BENCH_BIN) -hubproxy $(BIN) -minio $(MINIO) $(BENCH_FLAGS)

bench-quick: bench-bin minio
	./$(BENCH_BIN) -quick -hubproxy $(BIN) -minio $(MINIO) $(BENCH_FLAGS)
