#!/usr/bin/env python3
"""The torch half of scripts/gpu-check.sh (needs torch, safetensors, cuda-python).

  make --out FILE --size 2GiB   write a synthetic model with every common dtype
  time --repo R --file FILE --json OUT
        time hubproxy staging (cold cache, then warm) against
        safetensors.torch.load_file(FILE, device="cuda:0"), and compare every
        staged tensor's bytes with load_file's on the GPU

hubproxy must serve FILE as R (a dir: upstream) with its admin API on
HUBPROXY_ADMIN_SOCKET; the staging goes through examples/gpu_consumer.py's
functions, the file descriptor handover included.
"""
import argparse
import importlib.util
import json
import os
import re
import statistics
import sys
import time

import torch
from safetensors.torch import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def load_consumer():
    spec = importlib.util.spec_from_file_location("gpu_consumer", os.path.join(ROOT, "examples", "gpu_consumer.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def stage_once(gc, repo, uuid, ordinal):
    """Stages every tensor, imports the memory and wraps each tensor: the
    time until the weights are usable tensors on the GPU."""
    start = time.perf_counter()
    lease, fds, sock = gc.stage({"repo": repo, "names": [], "prefix": "layers.", "device": uuid, "handover": "auto", "hold": True})
    if lease["handover"] == "fd":
        mem = gc.VMMImport(fds[0], lease["bytes"], ordinal)
        os.close(fds[0])
    else:
        mem = gc.IPCImport(lease["ipc_handle"])
    out = {}
    for t in lease["tensors"]:
        raw = gc.raw_tensor(mem.base + t["offset"], t["bytes"], ordinal)
        out[t["name"]] = raw
    torch.cuda.synchronize()
    return time.perf_counter() - start, lease, out, mem, sock


def time_it(args):
    gc = load_consumer()
    ordinal = 0
    torch.cuda.set_device(ordinal)
    torch.zeros(1, device="cuda:0")
    gc.check(gc.cu.cuInit(0))
    uuid = gc.device_uuid(ordinal)

    # load_file, with the file in the page cache (as hubproxy's warm cache is).
    with open(args.file, "rb") as f:
        while f.read(64 << 20):
            pass
    times, ref = [], None
    for _ in range(args.runs):
        start = time.perf_counter()
        ref = load_file(args.file, device="cuda:0")
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if _ != args.runs - 1:
            del ref
            torch.cuda.empty_cache()
    load_s = statistics.median(times)
    nbytes = sum(t.numel() * t.element_size() for t in ref.values())

    hub, wrong = [], 0
    for run in range(args.runs + 1):  # the first is cold: hubproxy's cache is empty
        secs, lease, staged, mem, sock = stage_once(gc, args.repo, uuid, ordinal)
        hub.append(secs)
        if run == 0:
            for name in sorted(set(ref) - set(staged)):
                wrong += 1
                print(f"NOT STAGED: {name}")
            for name, raw in staged.items():
                want = ref[name].contiguous().view(torch.uint8).flatten()
                if raw.numel() != want.numel() or not torch.equal(raw, want):
                    wrong += 1
                    print(f"WRONG BYTES: {name}")
        staged.clear()
        torch.cuda.synchronize()
        if lease["handover"] == "fd":
            sock.close()
            mem.close()
        else:
            mem.close()
            sock.close()
    result = {"bytes": nbytes, "load_file_s": load_s, "load_file_runs": times,
              "hubproxy_cold_s": hub[0], "hubproxy_warm_s": statistics.median(hub[1:]), "hubproxy_runs": hub,
              "tensors": len(ref), "wrong_tensors": wrong}
    print(json.dumps(result, indent=2))
    with open(args.json, "w") as f:
        json.dump(result, f)
    sys.exit(1 if wrong else 0)


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
