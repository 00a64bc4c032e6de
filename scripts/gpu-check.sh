#!/usr/bin/env bash
# gpu-check: GPU staging measured on a real GPU, in one command (make gpu-check).
#
#   scripts/gpu-check.sh [--dry-run] [--out DIR] [--size SIZE]
#
# Built for a first run on a bare, time-limited GPU machine: it needs no Go,
# gcc, curl or network there (bin/ from `make gpu-check-prep` travels with the
# source), bounds every step with `timeout`, goes on past a failed step, and
# writes the report AS IT GOES: each step appends its section, its log and its
# verdict to DIR/report.md the moment it ends, so a run cut short still leaves
# everything before the cut. Every log stays in DIR (never deleted). DIR is
# --out, else $OUT when set, else a fresh directory under bench/results/.
#
# Steps (each with its budget, printed first):
#   1. machine facts (nvidia-smi),
#   2. the CUDA test binary against the real libcuda.so.1,
#   3. `hubproxy gpu bench`: the ceilings first, then staging cold and warm,
#      leases and device memory left,
#   3b. `hubproxy gpu vmmcheck`: the VMM descriptor semantics across three
#      processes (import, the importer's bytes surviving the exporter's
#      release, context reset and SIGKILL, an unimported descriptor's memory,
#      granularities), one JSON fact a line kept in vmmcheck.jsonl,
#   4. hubproxy serve with the admin socket; where python3 has torch,
#      safetensors and cuda-python: the load_file comparison and
#      examples/gpu_consumer.py; then leases left 0 (asked over the admin
#      socket with python3's standard library).
# It exits non-zero if any step failed. --dry-run runs every step against the
# fake driver the tests use (built with gcc, here only), with no GPU; the
# torch parts of step 4 are left out then.
set -uo pipefail

dry=0
out=
size=
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --size) size=${2:?--size needs a size}; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -z "$out" ]; then
  if [ -n "${OUT:-}" ]; then out=$OUT; else out=bench/results/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)-$$; fi
fi
mkdir -p "$out" || { echo "gpu-check: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
report=$out/report.md
[ -z "$size" ] && { if [ $dry = 1 ]; then size=256MiB; else size=2GiB; fi; }

# Budgets, seconds: the whole run stays well under 9 minutes.
b_facts=20 b_build=240 b_tests=150 b_bench=150 b_vmm=60 b_serve=20 b_torch=180 b_leases=15
[ $dry = 1 ] && b_tests=60 b_bench=60

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
# The trap only stops the server: logs and the report stay.
trap stop_server EXIT
trap 'stop_server; echo "- **INTERRUPTED** at $(date -u +%H:%M:%SZ)" >>"$report"; exit 130' INT TERM

failures=0
note() { echo "gpu-check: $*" >&2; }
# section TITLE LOG VERDICT...: appends a step's section to the report now.
section() {
  local title=$1 log=$2; shift 2
  {
    echo
    echo "## $title"
    echo
    for v in "$@"; do echo "- $v"; done
    if [ -n "$log" ] && [ -s "$log" ]; then
      echo
      echo "Log: \`$(basename "$log")\` (last 60 lines)"
      echo; echo '```'; tail -60 "$log"; echo '```'
    fi
  } >>"$report"
}
# verdict RC BUDGET WHAT: sets V to PASS, FAIL or TIMEOUT and counts
# failures. It sets a variable rather than printing, because a $(...) would
# count the failure in a subshell and lose it.
verdict() {
  local rc=$1 budget=$2 what=$3
  if [ "$rc" = 0 ]; then V="PASS: $what"; return; fi
  failures=$((failures + 1))
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then V="**TIMEOUT** after ${budget} s: $what"; else V="**FAIL** (exit $rc): $what"; fi
}
started=$(date +%s)

{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%M:%SZ)$([ $dry = 1 ] && echo ' (dry run, fake driver)')"
  echo
  echo "- Machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
  echo "- Budgets (s): facts $b_facts, build $b_build (only where Go is here), tests $b_tests, bench $b_bench, vmmcheck $b_vmm, serve $b_serve, torch $b_torch, leases $b_leases"
  echo "- Logs: $out"
} >"$report"
note "report: $report (written as each step ends)"
note "budgets (s): facts $b_facts, build $b_build, tests $b_tests, bench $b_bench, vmmcheck $b_vmm, serve $b_serve, torch $b_torch, leases $b_leases"

# 1. The driver, and what machine this is.
facts_log=$out/facts.log
if [ $dry = 1 ]; then
  driver=$out/libfakecuda.so
  timeout $b_facts gcc -shared -fPIC -O2 -pthread -o "$driver" internal/gpu/testdata/fakecuda/fakecuda.c >"$facts_log" 2>&1
  rc=$?
  echo "GPU: none (dry run against the fake driver internal/gpu/testdata/fakecuda)" >>"$facts_log"
  verdict $rc $b_facts "building the fake driver"; section "1. Machine facts" "$facts_log" "$V"
else
  driver=${HUBPROXY_GPU_DRIVER:-libcuda.so.1}
  if command -v nvidia-smi >/dev/null 2>&1; then
    (
      timeout $b_facts nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free,pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current --format=csv
      rc=$?
      timeout $b_facts nvidia-smi -q | sed -n '1,60p'
      exit $rc
    ) >"$facts_log" 2>&1
    rc=$?
  else
    echo "no nvidia-smi on PATH" >"$facts_log"; rc=127
  fi
  verdict $rc $b_facts "nvidia-smi"; section "1. Machine facts" "$facts_log" "$V"
fi
note "step 1 done: driver $driver"

# The binaries: built here where Go is, else the prebuilt ones.
build_log=$out/build.log
if command -v go >/dev/null 2>&1; then
  note "building with -tags cuda (at most $b_build s)"
  {
    CGO_ENABLED=1 timeout $b_build go build -trimpath -tags cuda -o bin/hubproxy-cuda ./cmd/hubproxy &&
      CGO_ENABLED=1 timeout $b_build go test -c -trimpath -tags cuda -o bin/gpu-cuda.test ./internal/gpu
  } >"$build_log" 2>&1
  rc=$?
  verdict $rc $b_build "go build -tags cuda"; section "Build (Go found)" "$build_log" "$V"
else
  ls -l bin/hubproxy-cuda bin/gpu-cuda.test >"$build_log" 2>&1
  rc=$?
  verdict $rc 0 "prebuilt bin/hubproxy-cuda and bin/gpu-cuda.test present"; section "Build (no Go: prebuilt bin/ from make gpu-check-prep)" "$build_log" "$V"
fi
echo "- hubproxy: $(bin/hubproxy-cuda --version 2>/dev/null | head -1)" >>"$report"

# 2. The CUDA tests, against the real driver (tests that need the fake's
# fault injection skip themselves then). They run in the package directory:
# the fake driver's source is in its testdata.
tests_log=$out/tests.log
note "step 2: CUDA tests (at most $b_tests s)"
if [ $dry = 1 ]; then
  (cd internal/gpu && timeout -k 5 $b_tests ../../bin/gpu-cuda.test -test.count=1 -test.v) >"$tests_log" 2>&1
else
  (cd internal/gpu && HUBPROXY_TEST_CUDA_DRIVER=$driver timeout -k 5 $b_tests ../../bin/gpu-cuda.test -test.count=1 -test.v) >"$tests_log" 2>&1
fi
rc=$?
verdict $rc $b_tests "$(grep -c '^--- PASS' "$tests_log") passed, $(grep -c '^--- SKIP' "$tests_log") skipped, $(grep -c '^--- FAIL' "$tests_log") failed"
section "2. CUDA tests against $driver" "$tests_log" "$V"

# 3. Ceilings and staging. The bench prints the ceilings before it stages,
# so a staging failure still leaves them in the log.
bench_log=$out/bench.log
note "step 3: hubproxy gpu bench --size $size (at most $b_bench s)"
timeout -k 5 $b_bench bin/hubproxy-cuda gpu bench --driver-path "$driver" --size "$size" >"$bench_log" 2>&1
rc=$?
ratio() { awk -v k="$1" -F': ' '$1 == k { print $2 }' "$bench_log"; }
verdict $rc $b_bench "gpu bench"; v=("$V")
stage_ratio=$(ratio "staging / pinned ceiling")
[ -n "$stage_ratio" ] && v+=("staging from the warm cache / pinned ceiling: **$stage_ratio** (goal ≥ 0.8)")
vmm_ratio=$(ratio "VMM fd / IPC staging")
[ -n "$vmm_ratio" ] && v+=("warm staging over the VMM fd handover / over IPC: **$vmm_ratio**")
if ! grep -q "^leases left: 0$" "$bench_log"; then
  failures=$((failures + 1)); v+=("**FAIL**: no \`leases left: 0\` line")
fi
section "3. hubproxy gpu bench --size $size" "$bench_log" "${v[@]}"

# 3b. VMM semantics: the check re-executes itself as the importer and the
# (killed) exporter; its facts go to vmmcheck.jsonl as they are found.
vmm_facts=$out/vmmcheck.jsonl vmm_log=$out/vmmcheck.log
vmm_size=256MiB
[ $dry = 1 ] && vmm_size=4MiB
note "step 3b: hubproxy gpu vmmcheck --size $vmm_size (at most $b_vmm s)"
timeout -k 5 $b_vmm bin/hubproxy-cuda gpu vmmcheck --driver-path "$driver" --size "$vmm_size" --step-timeout 30s >"$vmm_facts" 2>"$vmm_log"
rc=$?
verdict $rc $b_vmm "gpu vmmcheck: $(grep -c '"pass":true' "$vmm_facts") facts passed, $(grep -c '"pass":false' "$vmm_facts") failed"
v=("$V")
while IFS= read -r line; do v+=("\`$line\`"); done <"$vmm_facts"
section "3b. hubproxy gpu vmmcheck --size $vmm_size" "$vmm_log" "${v[@]}"

# 4. A served hubproxy: the consumer and load_file where torch is, and the
# leases asked over the admin socket (python3's standard library, no curl).
leases_query() {
  python3 - "$1" <<'EOF'
import http.client, json, socket, sys
class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(sys.argv[1])
c = Conn("hubproxy")
c.request("GET", "/gpu/leases")
r = c.getresponse()
body = r.read().decode()
print("GET /gpu/leases:", r.status, body)
sys.exit(0 if r.status == 200 and len(json.loads(body)["leases"]) == 0 else 1)
EOF
}
serve_log=$out/serve.log torch_log=$out/torch.log
hub=$out/hub sock=$out/admin.sock
mkdir -p "$hub/check/model"
: >"$torch_log"
v=()
have_torch=0
if [ $dry = 0 ] && timeout 60 python3 -c 'import torch, safetensors, cuda' >>"$torch_log" 2>&1; then have_torch=1; fi
model=$hub/check/model/model.safetensors
if [ $have_torch = 1 ]; then
  timeout $b_torch python3 scripts/gpu_check_torch.py make --out "$model" --size "$size" >>"$torch_log" 2>&1
  rc=$?; verdict $rc $b_torch "making the check model"; v+=("$V")
else
  # A tiny valid file, so serve has a repo to answer for.
  printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' >"$model"
fi
rm -f "$sock"
bin/hubproxy-cuda serve --upstream "dir:$hub" --cache-dir "$out/cache" --listen 127.0.0.1:18931 \
  --admin-listen "unix://$sock" --gpu-driver-path "$driver" --log-level warn >"$serve_log" 2>&1 &
server_pid=$!
for _ in $(seq $((b_serve * 10))); do [ -S "$sock" ] && break; kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
if [ -S "$sock" ]; then
  v+=("PASS: hubproxy serve opened its admin socket")
  if [ $have_torch = 1 ]; then
    export HUBPROXY_ADMIN_SOCKET=$sock HF_ENDPOINT=http://127.0.0.1:18931 PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
    timeout -k 5 $b_torch python3 scripts/gpu_check_torch.py time --repo check/model --file "$model" --json "$out/torch.json" >>"$torch_log" 2>&1
    rc=$?; verdict $rc $b_torch "timing against load_file"; v+=("$V")
    if [ -s "$out/torch.json" ]; then
      v+=("$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("load_file(device=cuda:0) / hubproxy, time to tensors on the GPU: **%.2f×** (goal ≥ 2); cold cache %.2f s, warm %.2f s, load_file %.2f s, %d bytes" % (d["load_file_s"]/d["hubproxy_warm_s"], d["hubproxy_cold_s"], d["hubproxy_warm_s"], d["load_file_s"], d["bytes"]))' "$out/torch.json" 2>&1)")
    fi
    timeout -k 5 $b_torch python3 examples/gpu_consumer.py --repo check/model --prefix layers. >>"$torch_log" 2>&1
    rc=$?; verdict $rc $b_torch "examples/gpu_consumer.py: fd handover, bytes against the file"; v+=("$V")
  elif [ $dry = 1 ]; then
    v+=("dry run: the consumer and load_file comparison need a GPU")
  else
    failures=$((failures + 1))
    v+=("**FAIL**: python3 lacks torch, safetensors or cuda-python: no consumer, no load_file comparison (see the log)")
  fi
  timeout $b_leases bash -c "$(declare -f leases_query); leases_query '$sock'" >>"$torch_log" 2>&1
  rc=$?; verdict $rc $b_leases "leases left 0 at the end (GET /gpu/leases over the admin socket)"; v+=("$V")
else
  failures=$((failures + 1))
  v+=("**FAIL**: hubproxy serve did not open its admin socket in $b_serve s (see serve.log)")
fi
stop_server
cat "$serve_log" >>"$torch_log"
section "4. Served hubproxy: consumer, load_file, leases" "$torch_log" "${v[@]}"

{
  echo
  echo "## Verdict"
  echo
  if [ $failures = 0 ]; then echo "- every step passed"; else echo "- **$failures step(s) failed**: see the sections above"; fi
  echo "- Took $(( $(date +%s) - started )) s"
} >>"$report"
note "done in $(( $(date +%s) - started )) s, $failures failure(s); report: $report"
[ $failures = 0 ]
