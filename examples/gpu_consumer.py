#!/usr/bin/env python3
"""Stage tensors onto a GPU through hubproxy and use them from PyTorch, zero-copy.

hubproxy runs next to this process (same pod, same GPU) with its admin API on a
Unix socket. This program asks it to stage some tensors of a model, opens the
CUDA IPC handle it returns, builds torch tensors at the returned offsets through
CuPy and DLPack (no copy), and checks them against safetensors' own loading of
the same file.

    pip install torch cupy-cuda12x safetensors
    python3 examples/gpu_consumer.py --repo org/model --prefix model.layers.0.

Environment: HUBPROXY_ADMIN (default unix:///run/hubproxy/admin.sock) and
HF_ENDPOINT (default http://127.0.0.1:8080, used to fetch the reference file).
"""
import argparse
import base64
import http.client
import json
import os
import socket
import sys
import tempfile
import urllib.request

import cupy
import torch
from safetensors.torch import load_file

TORCH_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
    "F8_E4M3": getattr(torch, "float8_e4m3fn", None), "F8_E5M2": getattr(torch, "float8_e5m2", None),
}


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket (the admin API is never on a TCP port)."""

    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def admin(method, path, body=None):
    addr = os.environ.get("HUBPROXY_ADMIN", "unix:///run/hubproxy/admin.sock")
    if addr.startswith("unix://"):
        conn = UnixHTTPConnection(addr[len("unix://"):])
    else:
        conn = http.client.HTTPConnection(addr)
    headers = {"Content-Type": "application/json"}
    if os.environ.get("HF_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["HF_TOKEN"]
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    if resp.status >= 300:
        sys.exit(f"{method} {path}: {resp.status} {data.decode(errors='replace')}")
    return json.loads(data) if data else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--revision", default="main")
    ap.add_argument("--names", nargs="*", default=[])
    ap.add_argument("--prefix", default="")
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args()

    lease = admin("POST", "/gpu/stage", {
        "repo": args.repo, "revision": args.revision, "names": args.names,
        "prefix": args.prefix, "device": args.device,
    })
    print(f"staged {len(lease['tensors'])} tensors, {lease['bytes']} bytes in "
          f"{lease['seconds']:.3f}s ({lease['gbps']:.2f} GB/s), lease {lease['lease']}")

    endpoint = os.environ.get("HF_ENDPOINT", "http://127.0.0.1:8080")
    listing = json.load(urllib.request.urlopen(
        f"{endpoint}/models/{args.repo}/tensors?revision={lease['commit']}"))
    file_of = {t["name"]: t["file"] for t in listing["tensors"]}
    references = {}

    failures = 0
    with cupy.cuda.Device(args.device):
        ptr = cupy.cuda.runtime.ipcOpenMemHandle(base64.b64decode(lease["ipc_handle"]))
        try:
            mem = cupy.cuda.UnownedMemory(ptr, lease["bytes"], owner=None, device_id=args.device)
            for t in lease["tensors"]:
                raw = cupy.ndarray((t["bytes"],), dtype=cupy.uint8,
                                   memptr=cupy.cuda.MemoryPointer(mem, t["offset"]))
                staged = torch.from_dlpack(raw).view(TORCH_DTYPES[t["dtype"]]).reshape(t["shape"])
                f = file_of[t["name"]]
                if f not in references:
                    local = os.path.join(tempfile.mkdtemp(), os.path.basename(f))
                    urllib.request.urlretrieve(f"{endpoint}/{args.repo}/resolve/{lease['commit']}/{f}", local)
                    references[f] = load_file(local, device=f"cuda:{args.device}")
                ok = torch.equal(staged, references[f][t["name"]])
                failures += not ok
                print(f"{'OK  ' if ok else 'FAIL'} {t['name']} {t['dtype']} {t['shape']}")
        finally:
            cupy.cuda.runtime.ipcCloseMemHandle(ptr)
            admin("DELETE", f"/gpu/leases/{lease['lease']}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
