#!/usr/bin/env python3
"""The torch half of scripts/gpu-check.sh (needs torch, safetensors, cuda-python).

  make --out FILE --size 2GiB   write a synthetic model with every common dtype
  time --repo R --file FILE --json OUT
        time hubproxy.load_file(R, basename(FILE), device="cuda:0") (cold
        cache, then warm) against safetensors.torch.load_file(FILE,
        device="cuda:0"), compare every tensor's dtype, shape and bytes on the
        GPU, and check each load was one lease, gone once its tensors were freed

hubproxy must serve FILE as R (a dir: upstream) at HF_ENDPOINT with its admin
API on HUBPROXY_ADMIN_SOCKET, so that load_file stages through it (the file
descriptor handover included).
"""
import argparse
import gc
import json
import os
import re
import statistics
import sys
import time

import torch
from safetensors.torch import load_file, save_file

# hubproxy's loader, from this checkout's python/ (gpu-check.sh also puts it on
# PYTHONPATH, but only after "make" has run).
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import hubproxy  # noqa: E402


def parse_size(s):
    m = re.fullmatch(r"(\d+)\s*(|KiB|MiB|GiB)", s.strip())
    if not m:
        sys.exit(f"bad size {s!r}: want e.g. 512MiB or 2GiB")
    return int(m.group(1)) << {"": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m.group(2)]


def make(args):
    total = parse_size(args.size)
    dtypes = [torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]
    for name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
        if hasattr(torch, name):
            dtypes.append(getattr(torch, name))
    g = torch.Generator().manual_seed(7)
    tensors, used, i = {}, 0, 0
    piece = 64 << 20
    while used < total:
        dt = dtypes[i % len(dtypes)]
        n = min(piece, total - used) // torch.empty(0, dtype=dt).element_size()
        raw = torch.randint(0, 256, (n * torch.empty(0, dtype=dt).element_size(),), dtype=torch.uint8, generator=g)
        if dt == torch.bool:
            raw &= 1
        tensors[f"layers.{i:04d}.{str(dt).removeprefix('torch.')}"] = raw.view(dt).reshape(-1, 64) if n % 64 == 0 else raw.view(dt)
        used += raw.numel()
        i += 1
    save_file(tensors, args.out)
    print(f"wrote {args.out}: {len(tensors)} tensors, {used} bytes")


def wait_no_leases(timeout=10.0):
    """Waits until hubproxy lists no lease of ours: the tensors are freed."""
    deadline = time.monotonic() + timeout
    while hubproxy.leases():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def as_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8)


def time_it(args):
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda:0")
    filename = os.path.basename(args.file)

    # load_file, with the file in the page cache (as hubproxy's warm cache is).
    with open(args.file, "rb") as f:
        while f.read(64 << 20):
            pass
    times, ref = [], None
    for run in range(args.runs):
        start = time.perf_counter()
        ref = load_file(args.file, device="cuda:0")
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if run != args.runs - 1:
            del ref
            torch.cuda.empty_cache()
    load_s = statistics.median(times)
    nbytes = sum(t.numel() * t.element_size() for t in ref.values())

    hub, wrong, staged_leases, leftover = [], 0, [], 0
    for run in range(args.runs + 1):  # the first is cold: hubproxy's cache is empty
        start = time.perf_counter()
        got = hubproxy.load_file(args.repo, filename, device="cuda:0")
        torch.cuda.synchronize()
        hub.append(time.perf_counter() - start)
        staged_leases.append(len(hubproxy.leases()))  # 1: staged by hubproxy, not loaded and copied
        if run == 0:
            for name in sorted(set(ref) ^ set(got)):
                wrong += 1
                print(f"MISSING OR EXTRA: {name}")
            for name in sorted(set(ref) & set(got)):
                a, b = got[name], ref[name]
                if a.dtype != b.dtype or a.shape != b.shape or not a.is_cuda or not torch.equal(as_bytes(a), as_bytes(b)):
                    wrong += 1
                    print(f"WRONG: {name} {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
        del got
        gc.collect()
        torch.cuda.synchronize()
        if not wait_no_leases():
            leftover += 1
            print(f"LEASE LEFT: run {run}: hubproxy still lists a lease after its tensors were freed")
    result = {"bytes": nbytes, "load_file_s": load_s, "load_file_runs": times,
              "hubproxy_cold_s": hub[0], "hubproxy_warm_s": statistics.median(hub[1:]), "hubproxy_runs": hub,
              "leases_while_loaded": staged_leases, "runs_with_a_lease_left": leftover,
              "tensors": len(ref), "wrong_tensors": wrong}
    print(json.dumps(result, indent=2))
    with open(args.json, "w") as f:
        json.dump(result, f)
    sys.exit(1 if wrong or leftover or any(n != 1 for n in staged_leases) else 0)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--size", default="2GiB")
    t = sub.add_parser("time")
    t.add_argument("--repo", required=True)
    t.add_argument("--file", required=True)
    t.add_argument("--json", required=True)
    t.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    make(args) if args.cmd == "make" else time_it(args)


if __name__ == "__main__":
    main()
