#!/usr/bin/env python3
"""Stage tensors onto a GPU through hubproxy and use them from PyTorch, zero-copy.

hubproxy runs next to this process (same pod, same node) with its admin API on a
Unix socket. This program:

  1. names its GPU by UUID (ordinals differ between containers), and asks hubproxy
     to stage some tensors of a model there, holding the lease by its connection;
  2. receives the memory as a file descriptor with the answer (SCM_RIGHTS), imports
     it with the CUDA virtual memory management API (cuda-python), maps it and checks
     the memory is on its own GPU; from then on it owns a reference of its own, so
     hubproxy releasing the lease, restarting or crashing cannot take the weights away;
  3. builds a torch tensor for every tensor at its offset, by dtype and shape (every
     safetensors dtype; the few torch lacks stay raw bytes), and compares each one's
     bytes, as uint8, with the bytes of the safetensors file as the hub serves it
     (its header parsed here, independently of hubproxy);
  4. ends the lease by closing the connection and checks the tensors again: they are
     the consumer's now.

Where the device has no VMM support hubproxy falls back to a CUDA IPC handle; that
memory is hubproxy's, freed when the lease ends, so the program unmaps it before it
closes the connection.

    pip install torch cuda-python
    python3 examples/gpu_consumer.py --repo org/model --prefix model.layers.0.

Environment: HUBPROXY_ADMIN_SOCKET (set by the Helm chart; default
/run/hubproxy/admin.sock), HF_ENDPOINT (default http://127.0.0.1:8080, for the
reference bytes) and HF_TOKEN (optional). The pod needs the GPU visible in this
container; with the file descriptor handover it needs no shared PID namespace.
"""
import argparse
import ctypes
import json
import os
import socket
import struct
import sys
import time
import urllib.request

import torch

try:
    from cuda.bindings import driver as cu  # cuda-python >= 12.6
except ImportError:  # older cuda-python
    from cuda import cuda as cu

# Every safetensors dtype, by torch's name for it. F6_* have no torch dtype: those
# tensors stay raw uint8 bytes, as do any dtype this torch build lacks.
TORCH_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64",
    "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64", "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F4": "float4_e2m1fn_x2",  # two values per byte
    "F6_E2M3": None, "F6_E3M2": None,
}


def check(result):
    """Unwraps a cuda-python result tuple, raising on an error code."""
    err, *rest = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def device_uuid(ordinal):
    """This process's device `ordinal` as nvidia-smi names it: GPU-xxxxxxxx-..."""
    dev = check(cu.cuDeviceGet(ordinal))
    get_uuid = getattr(cu, "cuDeviceGetUuid_v2", None) or cu.cuDeviceGetUuid  # _v2: MIG-aware, as hubproxy asks
    b = bytes(check(get_uuid(dev)).bytes)
    h = b.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def admin_socket():
    path = os.environ.get("HUBPROXY_ADMIN_SOCKET")
    if not path:
        addr = os.environ.get("HUBPROXY_ADMIN", "unix:///run/hubproxy/admin.sock")
        if not addr.startswith("unix://"):
            sys.exit("the file descriptor handover needs the admin API on a Unix socket")
        path = addr[len("unix://"):]
    return path


def recv(sock, fds):
    """One recvmsg: bytes, with any file descriptors that came on them kept in fds.
    A plain recv would make the kernel close those descriptors."""
    data, got, _flags, _addr = socket.recv_fds(sock, 1 << 16, 4)
    fds.extend(got)
    return data


def admin_get(path):
    """GETs path on the admin socket and returns the decoded JSON answer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(admin_socket())
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: hubproxy\r\n\r\n".encode())
        buf = b""
        while chunk := sock.recv(1 << 16):
            buf += chunk
    finally:
        sock.close()
    header, _, body = buf.partition(b"\r\n\r\n")
    status = int(header.split()[1])
    if status != 200:
        sys.exit(f"GET {path}: {status} {body.decode(errors='replace')}")
    return json.loads(body)


def wait_released(lease_id, timeout=10.0):
    """Waits until hubproxy no longer lists the lease: it releases a held lease
    once it sees the staging connection close, which takes a moment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(l["lease"] != lease_id for l in admin_get("/gpu/leases")["leases"]):
            return True
        time.sleep(0.05)
    return False


def stage(body):
    """POSTs /gpu/stage on a new connection and returns (answer, descriptors, socket).
    With "hold" the socket is the lease: keep it open while the memory is in use."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(admin_socket())
    data = json.dumps(body).encode()
    head = ("POST /gpu/stage HTTP/1.1\r\nHost: hubproxy\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n")
    if os.environ.get("HF_TOKEN"):
        head += f"Authorization: Bearer {os.environ['HF_TOKEN']}\r\n"
    sock.sendall((head + "\r\n").encode() + data)
    buf, fds = b"", []
    while b"\r\n\r\n" not in buf:
        chunk = recv(sock, fds)
        if not chunk:
            sys.exit("hubproxy closed the connection without an answer")
        buf += chunk
    header, _, rest = buf.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = recv(sock, fds)
        if not chunk:
            break
        rest += chunk
    if status >= 300:
        sys.exit(f"POST /gpu/stage: {status} {rest.decode(errors='replace')}")
    return json.loads(rest[:length]), fds, sock


class VMMImport:
    """Memory imported from hubproxy's file descriptor: our own handle, mapped
    read-write on our device. It lives until close(), whatever hubproxy does."""

    def __init__(self, fd, size, ordinal):
        fd_type = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        self.size = size
        self.handle = check(cu.cuMemImportFromShareableHandle(fd, fd_type))
        # Where the memory is, in this process's numbering: it must be our device,
        # or the mapping would reach another GPU's memory over the interconnect.
        prop = check(cu.cuMemGetAllocationPropertiesFromHandle(self.handle))
        if prop.location.id != ordinal:
            raise RuntimeError(f"the imported memory is on device {prop.location.id}, not {ordinal}")
        self.ptr = check(cu.cuMemAddressReserve(size, 0, 0, 0))
        check(cu.cuMemMap(self.ptr, size, 0, self.handle, 0))
        desc = cu.CUmemAccessDesc()
        desc.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = ordinal
        desc.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        check(cu.cuMemSetAccess(self.ptr, size, [desc], 1))
        self.base = int(self.ptr)

    def close(self):
        check(cu.cuMemUnmap(self.ptr, self.size))
        check(cu.cuMemAddressFree(self.ptr, self.size))
        check(cu.cuMemRelease(self.handle))


class IPCImport:
    """The fallback: a CUDA IPC handle, opened through libcuda with ctypes (the
    handle is a 64-byte struct passed by value). The memory stays hubproxy's."""

    class Handle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]

    def __init__(self, handle_b64):
        import base64

        self.lib = ctypes.CDLL("libcuda.so.1")
        open_handle = self.lib.cuIpcOpenMemHandle_v2
        open_handle.argtypes = [ctypes.POINTER(ctypes.c_uint64), self.Handle, ctypes.c_uint]
        self.lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        h = self.Handle()
        h.reserved = base64.b64decode(handle_b64)
        ptr = ctypes.c_uint64()
        rc = open_handle(ctypes.byref(ptr), h, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
        if rc != 0:
            raise RuntimeError(f"cuIpcOpenMemHandle failed: {rc}")
        self.base = ptr.value

    def close(self):
        self.lib.cuIpcCloseMemHandle(self.base)


class _DeviceBytes:
    """A device address range as __cuda_array_interface__, so torch wraps it
    without copying."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "strides": None, "version": 3,
        }


def raw_tensor(ptr, nbytes, ordinal):
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8, device=f"cuda:{ordinal}")
    return torch.as_tensor(_DeviceBytes(ptr, nbytes), device=f"cuda:{ordinal}")


def typed_tensor(raw, dtype_name, shape):
    """raw (uint8, on the device) as a tensor of its dtype and shape, or raw itself
    where torch has no such dtype."""
    name = TORCH_NAMES.get(dtype_name)
    dt = getattr(torch, name, None) if name else None
    if dt is None:
        return raw
    shape = list(shape)
    if dtype_name == "F4":  # float4_e2m1fn_x2 holds two values per byte
        if not shape or shape[-1] % 2:
            return raw
        shape[-1] //= 2
    return raw.view(dt).reshape(shape)


def http_range(url, start, end):
    """Bytes [start, end) of url."""
    if end <= start:
        return b""
    req = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end - 1}"})
    if os.environ.get("HF_TOKEN"):
        req.add_header("Authorization", "Bearer " + os.environ["HF_TOKEN"])
    with urllib.request.urlopen(req) as resp:
        data = resp.read()
    if len(data) != end - start:
        raise RuntimeError(f"{url}: asked for {end - start} bytes, got {len(data)}")
    return data


class Reference:
    """Tensor bytes straight from the safetensors files as the hub serves them:
    the 8-byte header length, the JSON header, data_offsets after it."""

    def __init__(self, endpoint, repo, commit):
        self.base = f"{endpoint}/{repo}/resolve/{commit}/"
        self.headers = {}

    def tensor(self, file, name):
        if file not in self.headers:
            n = struct.unpack("<Q", http_range(self.base + file, 0, 8))[0]
            self.headers[file] = (8 + n, json.loads(http_range(self.base + file, 8, 8 + n)))
        start, header = self.headers[file]
        lo, hi = header[name]["data_offsets"]
        return http_range(self.base + file, start + lo, start + hi)


def same_bytes(raw, want):
    """Compares as uint8: equal bytes are equal tensors, whatever NaNs or float8
    encodings they hold (torch.equal on typed values is not)."""
    if raw.numel() != len(want):
        return False
    if not want:
        return True
    return torch.equal(raw.cpu(), torch.frombuffer(bytearray(want), dtype=torch.uint8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--revision", default="main")
    ap.add_argument("--names", nargs="*", default=[])
    ap.add_argument("--prefix", default="")
    ap.add_argument("--device", type=int, default=0, help="this process's CUDA ordinal")
    ap.add_argument("--handover", default="auto", choices=["auto", "fd", "ipc"])
    args = ap.parse_args()

    torch.cuda.set_device(args.device)
    torch.zeros(1, device=f"cuda:{args.device}")  # makes the primary context current here
    check(cu.cuInit(0))
    uuid = device_uuid(args.device)

    lease, fds, sock = stage({
        "repo": args.repo, "revision": args.revision, "names": args.names, "prefix": args.prefix,
        "device": uuid, "handover": args.handover, "hold": True,
    })
    print(f"staged {len(lease['tensors'])} tensors, {lease['bytes']} bytes in {lease['seconds']:.3f}s "
          f"({lease['gbps']:.2f} GB/s) on {lease['device_uuid']}, lease {lease['lease']} by {lease['handover']}")
    if lease["device_uuid"] != uuid:
        sys.exit(f"hubproxy staged on {lease['device_uuid']}, this process uses {uuid}")

    if lease["handover"] == "fd":
        if len(fds) != 1:
            sys.exit(f"expected one file descriptor with the answer, got {len(fds)}")
        mem = VMMImport(fds[0], lease["bytes"], args.device)
        os.close(fds[0])  # the import holds its own reference
    else:
        mem = IPCImport(lease["ipc_handle"])

    endpoint = os.environ.get("HF_ENDPOINT", "http://127.0.0.1:8080")
    with urllib.request.urlopen(f"{endpoint}/models/{args.repo}/tensors?revision={lease['commit']}") as resp:
        file_of = {t["name"]: t["file"] for t in json.load(resp)["tensors"]}
    ref = Reference(endpoint, args.repo, lease["commit"])

    tensors, failures = {}, 0
    for t in lease["tensors"]:
        raw = raw_tensor(mem.base + t["offset"], t["bytes"], args.device)
        tensors[t["name"]] = (raw, typed_tensor(raw, t["dtype"], t["shape"]))
        ok = same_bytes(raw, ref.tensor(file_of[t["name"]], t["name"]))
        failures += not ok
        typed = tensors[t["name"]][1]
        print(f"{'OK  ' if ok else 'FAIL'} {t['name']} {t['dtype']} {t['shape']} as {typed.dtype}")

    if lease["handover"] == "fd":
        # End the lease: hubproxy lets go of its reference. Ours keeps the memory.
        # Check only once hubproxy has really released it, or the check proves nothing.
        sock.close()
        if not wait_released(lease["lease"]):
            failures += 1
            print(f"FAIL lease {lease['lease']} still listed 10 s after its connection closed")
        torch.cuda.synchronize()
        for t in lease["tensors"]:
            if not same_bytes(tensors[t["name"]][0], ref.tensor(file_of[t["name"]], t["name"])):
                failures += 1
                print(f"FAIL {t['name']} changed after the lease ended")
        print("lease ended; the tensors are still intact: this process owns them")
        tensors.clear()
        torch.cuda.synchronize()
        mem.close()
    else:
        # IPC memory is freed when the lease ends: stop using it first.
        tensors.clear()
        torch.cuda.synchronize()
        mem.close()
        sock.close()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
