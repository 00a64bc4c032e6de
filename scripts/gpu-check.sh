#!/usr/bin/env bash
# gpu-check: GPU staging measured on a real GPU, in one command (make gpu-check).
#
#   scripts/gpu-check.sh [--dry-run] [--out DIR] [--size SIZE]
#
# On a machine with an NVIDIA GPU and its driver it
#   1. builds hubproxy and the gpu package's tests with -tags cuda (or uses
#      bin/hubproxy-cuda and bin/gpu-cuda.test built beforehand by
#      `make gpu-check-prep` where this machine has no Go),
#   2. runs the CUDA tests against the real libcuda.so.1,
#   3. runs `hubproxy gpu bench`: pinned and pageable host→device ceilings, and
#      staging a synthetic model from a cold and then a warm cache, with a check
#      that no lease or device memory is left behind,
#   4. where Python has torch, cuda-python and safetensors: serves a model with
#      every dtype, runs examples/gpu_consumer.py (fd handover, byte-for-byte
#      against the file) and times hubproxy staging against
#      safetensors.torch.load_file(..., device="cuda:0"),
# and writes one Markdown report. It exits non-zero on any wrong byte, leak or
# failed test. --dry-run does steps 1-3 against the fake driver the tests use
# (no GPU; step 4 needs one and is left out), which is how CI proves the
# script up to the device boundary. Sized to finish in a few minutes on one GPU.
set -euo pipefail

dry=0
consumer_skipped=
out=bench/results
size=2GiB
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --out) out=$2; shift ;;
    --size) size=$2; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p "$out" bin
work=$(mktemp -d /tmp/gpu-check.XXXXXX)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
fail() { echo "gpu-check: FAIL: $*" >&2; failures=$((failures + 1)); echo "- **FAIL**: $*" >>"$work/verdicts"; }
note() { echo "gpu-check: $*" >&2; }
touch "$work/verdicts"
started=$(date +%s)

# 1. The driver, and what machine this is.
if [ $dry = 1 ]; then
  size=256MiB
  driver=$work/libfakecuda.so
  gcc -shared -fPIC -O2 -pthread -o "$driver" internal/gpu/testdata/fakecuda/fakecuda.c
  gpu_desc="none (dry run against the fake driver internal/gpu/testdata/fakecuda)"
  report=$out/gpu-check-dry-run.md
else
  driver=${HUBPROXY_GPU_DRIVER:-libcuda.so.1}
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu-check: no nvidia-smi: is this a GPU machine? (--dry-run checks the script without one)" >&2
    exit 2
  fi
  gpu_desc=$(nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader | head -1)
  report=$out/gpu-check-$(date -u +%Y-%m-%d)-$(hostname -s).md
fi
note "driver $driver; GPU: $gpu_desc"

# 2. The binaries.
if command -v go >/dev/null 2>&1; then
  note "building with -tags cuda"
  CGO_ENABLED=1 go build -tags cuda -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo unknown)" -o bin/hubproxy-cuda ./cmd/hubproxy
  CGO_ENABLED=1 go test -c -tags cuda -o bin/gpu-cuda.test ./internal/gpu
elif [ ! -x bin/hubproxy-cuda ] || [ ! -x bin/gpu-cuda.test ]; then
  echo "gpu-check: no Go here and no prebuilt bin/hubproxy-cuda, bin/gpu-cuda.test (make gpu-check-prep)" >&2
  exit 2
fi

# 3. The CUDA tests, against the real driver (tests that need the fake's
# fault injection skip themselves then). They run in the package directory:
# the fake driver's source is in its testdata.
tests_log=$work/tests.log
if [ $dry = 1 ]; then
  (cd internal/gpu && ../../bin/gpu-cuda.test -test.count=1 -test.v) >"$tests_log" 2>&1 || fail "CUDA tests (fake driver): see the log in the report"
else
  (cd internal/gpu && HUBPROXY_TEST_CUDA_DRIVER=$driver ../../bin/gpu-cuda.test -test.count=1 -test.v) >"$tests_log" 2>&1 || fail "CUDA tests against $driver: see the log in the report"
fi
tests_summary="$(grep -c '^--- PASS' "$tests_log" || true) passed, $(grep -c '^--- SKIP' "$tests_log" || true) skipped"

# 4. Ceilings and staging.
bench_log=$work/bench.log
note "hubproxy gpu bench --size $size"
bin/hubproxy-cuda gpu bench --driver-path "$driver" --size "$size" >"$bench_log" 2>&1 || fail "gpu bench: $(tail -1 "$bench_log")"
ratio() { awk -v k="$1" -F': ' '$1 == k { print $2 }' "$bench_log"; }
stage_ratio=$(ratio "staging / pinned ceiling")
grep -q "^leases left: 0$" "$bench_log" || fail "leases left behind after staging"

# 5. The consumer, and hubproxy against load_file, where torch is here.
torch_log=$work/torch.log
if python3 -c 'import torch, safetensors, cuda' >/dev/null 2>&1 && [ $dry = 0 ]; then
  hub=$work/hub
  mkdir -p "$hub/check/model"
  python3 scripts/gpu_check_torch.py make --out "$hub/check/model/model.safetensors" --size "$size" >>"$torch_log" 2>&1 ||
    fail "making the check model: see the log"
  bin/hubproxy-cuda serve --upstream "dir:$hub" --cache-dir "$work/cache" --listen 127.0.0.1:18931 \
    --admin-listen "unix://$work/admin.sock" --gpu-driver-path "$driver" --log-level warn >"$work/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do [ -S "$work/admin.sock" ] && break; sleep 0.1; done
  [ -S "$work/admin.sock" ] || fail "hubproxy serve did not open its admin socket in 10 s: $(tail -1 "$work/serve.log")"
  export HUBPROXY_ADMIN_SOCKET=$work/admin.sock HF_ENDPOINT=http://127.0.0.1:18931
  python3 scripts/gpu_check_torch.py time --repo check/model --file "$hub/check/model/model.safetensors" \
    --json "$work/torch.json" >>"$torch_log" 2>&1 || fail "timing against load_file: see the log"
  python3 examples/gpu_consumer.py --repo check/model --prefix layers. >>"$torch_log" 2>&1 || fail "examples/gpu_consumer.py: wrong bytes or a failed handover"
  leases=$(curl -s --unix-socket "$work/admin.sock" http://hubproxy/gpu/leases)
  echo "leases after the run: $leases" >>"$torch_log"
  python3 -c 'import json,sys; sys.exit(len(json.loads(sys.argv[1])["leases"]) != 0)' "$leases" || fail "leases left after the consumer ended them: $leases"
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
elif [ $dry = 1 ]; then
  echo "dry run: the consumer and load_file comparison need a GPU" >"$torch_log"
else
  echo "skipped: python3 lacks torch, safetensors or cuda-python (pip install torch safetensors cuda-python)" >"$torch_log"
  consumer_skipped=1
fi

# The report.
{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- GPU: $gpu_desc"
  echo "- Machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "- hubproxy: $(bin/hubproxy-cuda --version 2>/dev/null | head -1)"
  echo "- Took $(( $(date +%s) - started )) s"
  echo
  echo "## Verdict"
  echo
  if [ $failures = 0 ]; then echo "- no wrong bytes, no leaks, every test passed"; else cat "$work/verdicts"; fi
  [ -n "$consumer_skipped" ] && echo "- **SKIPPED**: the fd handover to a consumer and the load_file comparison (no torch, safetensors or cuda-python here)"
  [ -n "$stage_ratio" ] && echo "- staging from the warm cache / pinned ceiling: **$stage_ratio** (goal ≥ 0.8)"
  if [ -s "$work/torch.json" ]; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("- load_file(device=cuda:0) / hubproxy, time to tensors on the GPU: **%.2f×** (goal ≥ 2); cold cache %.2f s, warm %.2f s, load_file %.2f s, %d bytes" % (d["load_file_s"]/d["hubproxy_warm_s"], d["hubproxy_cold_s"], d["hubproxy_warm_s"], d["load_file_s"], d["bytes"]))' "$work/torch.json"
  fi
  echo
  echo "## hubproxy gpu bench --size $size"
  echo; echo '```'; cat "$bench_log"; echo '```'
  echo
  echo "## CUDA tests: $tests_summary"
  echo; echo '```'; tail -40 "$tests_log"; echo '```'
  echo
  echo "## Consumer and load_file"
  echo; echo '```'; tail -60 "$torch_log"; echo '```'
} >"$report"
note "report: $report"
[ $failures = 0 ]
