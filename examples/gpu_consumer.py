#!/usr/bin/env python3
"""Load a model's tensors onto a GPU through a co-located hubproxy, zero-copy,
with hubproxy's loader (python/hubproxy), and check them.

    PYTHONPATH=python python3 examples/gpu_consumer.py --repo org/model [--file model.safetensors]

hubproxy.load_file(..., device="cuda:N") has hubproxy stage the file's tensors
onto this process's GPU (named by UUID: ordinals differ between containers)
and imports the memory from the descriptor that comes with the answer
(SCM_RIGHTS, cuMemImportFromShareableHandle); the lease lives as long as any
of the tensors. This program compares every tensor's bytes with the file as
hubproxy serves it over HTTP (its header parsed here, independently), then
drops the tensors and checks hubproxy no longer lists the lease.

Environment: HUBPROXY_ADMIN_SOCKET (the Helm chart sets it), HF_ENDPOINT
(default http://127.0.0.1:8080), HF_TOKEN (optional). Needs torch and
cuda-python; the pod needs the GPU visible, no shared PID namespace.
"""
import argparse
import gc
import json
import os
import struct
import sys
import time
import urllib.request

import torch

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import hubproxy  # noqa: E402  (this checkout's python/, unless PYTHONPATH has another)


def http_range(url, start, end):
    if end <= start:
        return b""
    req = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end - 1}"})
    if os.environ.get("HF_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["HF_TOKEN"])
    with urllib.request.urlopen(req, timeout=120) as resp:
        data = resp.read()
    if len(data) != end - start:
        raise RuntimeError(f"{url}: asked for {end - start} bytes, got {len(data)}")
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--file", default="model.safetensors")
    ap.add_argument("--revision", default="main")
    ap.add_argument("--prefix", default="", help="check only the tensors whose names start with this")
    ap.add_argument("--device", type=int, default=0, help="this process's CUDA ordinal")
    args = ap.parse_args()
    if not hubproxy._gpu.reachable(hubproxy._gpu.admin_socket()):
        sys.exit("hubproxy's admin socket is not reachable: set HUBPROXY_ADMIN_SOCKET")

    before = {l["lease"] for l in hubproxy.leases()}
    start = time.perf_counter()
    tensors = hubproxy.load_file(args.repo, args.file, device=f"cuda:{args.device}", revision=args.revision,
                                 unsupported="raw")
    torch.cuda.synchronize()
    secs = time.perf_counter() - start
    mine = [l for l in hubproxy.leases() if l["lease"] not in before]
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    print(f"{len(tensors)} tensors, {nbytes} bytes on cuda:{args.device} in {secs:.3f}s; new leases: "
          f"{[l['lease'] for l in mine]}")
    failures = 0 if len(mine) == 1 else 1
    if failures:
        print("FAIL: expected exactly one new lease: the tensors were not staged by hubproxy")

    endpoint = os.environ.get("HF_ENDPOINT", "http://127.0.0.1:8080").rstrip("/")
    url = f"{endpoint}/{args.repo}/resolve/{args.revision}/{args.file}"
    n = struct.unpack("<Q", http_range(url, 0, 8))[0]
    header = json.loads(http_range(url, 8, 8 + n))
    header.pop("__metadata__", None)
    t = None
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if not name.startswith(args.prefix):
            continue
        lo, hi = info["data_offsets"]
        want = http_range(url, 8 + n + lo, 8 + n + hi)
        t = tensors.get(name)
        got = b"" if t is None or t.numel() == 0 else t.contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()
        ok = t is not None and t.is_cuda and got == want
        failures += not ok
        print(f"{'OK  ' if ok else 'FAIL'} {name} {info['dtype']} {info['shape']} as {t.dtype if t is not None else None}")

    # The lease ends when the last tensor is freed.
    del tensors, t
    gc.collect()
    torch.cuda.synchronize()
    deadline = time.monotonic() + 10
    while any(l["lease"] not in before for l in hubproxy.leases()):
        if time.monotonic() > deadline:
            failures += 1
            print("FAIL: the lease is still listed 10 s after its tensors were freed")
            break
        time.sleep(0.05)
    else:
        print("tensors freed: hubproxy released the lease")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
