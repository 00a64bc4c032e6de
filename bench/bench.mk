# Benchmarks: included from the top-level Makefile (`include bench/bench.mk`).
# `make bench` measures the machine's ceiling and runs every scenario at
# default sizes (about ten minutes on two cores) and writes
# bench/results/<date>-<host>.md; `make bench-quick` runs them at tiny sizes
# in well under a minute. Both install nginx-light and aria2 with apt-get
# when nginx or aria2c is missing and they run as root. Extra flags go in
# BENCH_FLAGS, e.g. `make bench BENCH_FLAGS='-large 4GiB -bandwidth 100MiB'`;
# `go run ./bench/cmd/hubbench -h` lists them.
# It uses the Makefile's `build` target and its GO and BIN variables.
BENCH_BIN := bin/hubbench
BENCH_FLAGS ?=

.PHONY: bench bench-quick bench-bin

bench-bin: build
	$(GO) build -o $(BENCH_BIN) ./bench/cmd/hubbench

bench: bench-bin
	./$(BENCH_BIN) -hubproxy $(BIN) $(BENCH_FLAGS)

bench-quick: bench-bin
	./$(BENCH_BIN) -quick -hubproxy $(BIN) $(BENCH_FLAGS)
