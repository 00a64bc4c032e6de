"""Tensors staged onto a GPU by a co-located hubproxy (POST /gpu/stage on its
admin Unix socket), imported from the handover, zero-copy.

The answer comes with the memory: a VMM allocation's file descriptor as
SCM_RIGHTS on its first byte ("fd"), or a CUDA IPC handle ("ipc"). The
descriptor is imported (cuMemImportFromShareableHandle) and closed at once,
on every path: an exported descriptor never imported would keep the
allocation alive. The lease is held by the staging connection ("hold"),
and both the connection and the import belong to one owner object that
every tensor's storage references; weakref.finalize on it releases them
(unmap, release, close: the lease ends) once the last tensor, view or slice
of them is freed, and not before.

The CUDA bindings are imported only here, and only when a GPU is asked for.
"""
import json
import os
import socket
import weakref

from ._errors import GPUDriverError, ProtocolError, from_response

MAX_ANSWER = 64 << 20


def admin_socket():
    """The admin API's Unix socket path, or None when none is configured."""
    path = os.environ.get("HUBPROXY_ADMIN_SOCKET")
    if path:
        return path
    addr = os.environ.get("HUBPROXY_ADMIN", "")
    return addr[len("unix://"):] if addr.startswith("unix://") else None


def reachable(path):
    """Whether something accepts connections on path: a stale socket file
    from a hubproxy that is gone is not staging."""
    if not path:
        return False
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(2.0)
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _recv(sock, fds):
    """One recvmsg: bytes, with any descriptors that came on them kept in fds
    (a plain recv would make the kernel close them unseen)."""
    data, got, _flags, _addr = socket.recv_fds(sock, 1 << 16, 4)
    fds.extend(got)
    return data


def _close_fds(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()


def request(path, method, target, body=None, token=None, timeout=600.0, keep=False):
    """One HTTP/1.1 exchange on a new connection to the admin socket: returns
    (status, headers, body, fds, sock). sock is returned open only when keep
    and the answer is a success (a held lease lives as long as it); otherwise
    it is closed, as are all descriptors of an error answer. Every read is
    bounded by timeout."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fds = []
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        data = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {target} HTTP/1.1\r\nHost: hubproxy\r\nContent-Length: {len(data)}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        if token:
            head += f"Authorization: Bearer {token}\r\n"
        if not keep:
            head += "Connection: close\r\n"
        sock.sendall((head + "\r\n").encode() + data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = _recv(sock, fds)
            if not chunk:
                raise ProtocolError(f"{method} {target}: hubproxy closed the admin connection without an answer")
            buf += chunk
            if len(buf) > MAX_ANSWER:
                raise ProtocolError(f"{method} {target}: an answer header over {MAX_ANSWER} bytes")
        header, _, rest = buf.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ProtocolError(f"{method} {target}: not an HTTP answer: {lines[0]!r}")
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > MAX_ANSWER:
            raise ProtocolError(f"{method} {target}: an answer without a usable Content-Length")
        length = int(length)
        while len(rest) < length:
            chunk = _recv(sock, fds)
            if not chunk:
                raise ProtocolError(f"{method} {target}: the answer broke off after {len(rest)} of {length} bytes")
            rest += chunk
        out = rest[:length]
        if status >= 300:
            raise from_response(status, headers, out, url="unix:" + path + target)
        if not keep:
            sock.close()
            sock = None
        return status, headers, out, fds, sock
    except BaseException:
        _close_fds(fds)
        sock.close()
        raise


class Lease:
    """A staging: the answer, the imported memory and the connection that
    holds the lease. Its finalizer (on this object) ends both."""

    def __init__(self, answer, sock, mem):
        self.answer, self.base = answer, mem.base
        self._finalizer = weakref.finalize(self, _release, sock, mem)

    @property
    def released(self):
        return not self._finalizer.alive

    def release(self):
        """Ends the lease now (only safe once no tensor of it is in use)."""
        self._finalizer()


def _release(sock, mem):
    # The memory first: with the IPC fallback it is hubproxy's, freed as
    # soon as the connection (the lease) ends.
    try:
        mem.close()
    finally:
        sock.close()


def stage(path, body, importer, token=None, timeout=600.0):
    """Stages body's tensors and returns the Lease. importer(answer, fd)
    returns the imported memory (an object with .base and .close()); fd is
    None with the IPC handover. The descriptor is closed on every path."""
    body = {**body, "hold": True}
    _status, _headers, raw, fds, sock = request(path, "POST", "/gpu/stage", body, token=token, timeout=timeout, keep=True)
    try:
        try:
            answer = json.loads(raw)
        except ValueError as e:
            raise ProtocolError(f"POST /gpu/stage: the answer is not JSON: {e}") from None
        fd = None
        if answer.get("handover") == "fd":
            if len(fds) != 1:
                raise ProtocolError(f"POST /gpu/stage: expected one file descriptor with the answer, got {len(fds)}")
            fd = fds[0]
        elif fds:
            raise ProtocolError(f"POST /gpu/stage: {len(fds)} unexpected file descriptors with an {answer.get('handover')!r} answer")
        mem = importer(answer, fd)
    except BaseException:
        sock.close()
        raise
    finally:
        _close_fds(fds)  # the import holds its own reference
    return Lease(answer, sock, mem)


# ---- CUDA (imported only on the GPU path) -------------------------------------------


def cuda_driver():
    try:
        from cuda.bindings import driver as cu  # cuda-python >= 12.6
    except ImportError:
        from cuda import cuda as cu  # older cuda-python
    return cu


def _check(cu, result, what):
    err, *rest = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise GPUDriverError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def device_uuid(cu, ordinal):
    """This process's device `ordinal` as nvidia-smi names it: GPU-xxxxxxxx-..."""
    dev = _check(cu, cu.cuDeviceGet(ordinal), "cuDeviceGet")
    get_uuid = getattr(cu, "cuDeviceGetUuid_v2", None) or cu.cuDeviceGetUuid  # _v2: MIG-aware, as hubproxy asks
    h = bytes(_check(cu, get_uuid(dev), "cuDeviceGetUuid").bytes).hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class VMMImport:
    """hubproxy's allocation imported from its descriptor: a reference of our
    own, mapped read-write on our device, alive until close()."""

    def __init__(self, cu, fd, size, ordinal, uuid):
        self.cu, self.size, self.ptr, self.handle = cu, size, None, None
        fd_type = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        self.handle = _check(cu, cu.cuMemImportFromShareableHandle(fd, fd_type), "cuMemImportFromShareableHandle")
        try:
            # The memory must be on our own device, or the mapping would reach
            # another GPU over the interconnect. location.id is an ordinal, whose
            # numbering may not be ours; the UUID of that ordinal decides.
            prop = _check(cu, cu.cuMemGetAllocationPropertiesFromHandle(self.handle), "cuMemGetAllocationPropertiesFromHandle")
            loc = int(prop.location.id)
            if loc != ordinal and device_uuid(cu, loc) != uuid:
                raise GPUDriverError(f"the imported memory is on device {loc}, not this process's {ordinal} ({uuid})")
            self.ptr = _check(cu, cu.cuMemAddressReserve(size, 0, 0, 0), "cuMemAddressReserve")
            _check(cu, cu.cuMemMap(self.ptr, size, 0, self.handle, 0), "cuMemMap")
            desc = cu.CUmemAccessDesc()
            desc.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            desc.location.id = ordinal
            desc.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            _check(cu, cu.cuMemSetAccess(self.ptr, size, [desc], 1), "cuMemSetAccess")
        except BaseException:
            self.close()
            raise
        self.base = int(self.ptr)

    def close(self):
        cu = self.cu
        if self.ptr is not None:
            cu.cuMemUnmap(self.ptr, self.size)
            cu.cuMemAddressFree(self.ptr, self.size)
            self.ptr = None
        if self.handle is not None:
            cu.cuMemRelease(self.handle)
            self.handle = None


class IPCImport:
    """The fallback: a CUDA IPC handle opened through libcuda (the handle is a
    64-byte struct passed by value). The memory stays hubproxy's."""

    def __init__(self, handle_b64):
        import base64
        import ctypes

        class Handle(ctypes.Structure):
            _fields_ = [("reserved", ctypes.c_char * 64)]

        self.lib = ctypes.CDLL("libcuda.so.1")
        open_handle = self.lib.cuIpcOpenMemHandle_v2
        open_handle.argtypes = [ctypes.POINTER(ctypes.c_uint64), Handle, ctypes.c_uint]
        self.lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        h = Handle()
        h.reserved = base64.b64decode(handle_b64)
        ptr = ctypes.c_uint64()
        rc = open_handle(ctypes.byref(ptr), h, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
        if rc != 0:
            raise GPUDriverError(f"cuIpcOpenMemHandle failed: {rc}")
        self.base = ptr.value

    def close(self):
        if self.base:
            self.lib.cuIpcCloseMemHandle(self.base)
            self.base = 0


class _DeviceBytes:
    """A device address range as __cuda_array_interface__. torch keeps this
    object alive as long as the storage it wraps, and it keeps the lease."""

    def __init__(self, ptr, nbytes, lease):
        self.lease = lease
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "strides": None, "version": 3,
        }


def cuda_wrap(device):
    import torch

    def wrap(ptr, nbytes, lease):
        return torch.as_tensor(_DeviceBytes(ptr, nbytes, lease), device=device)

    return wrap


def cuda_importer(ordinal, uuid):
    cu = cuda_driver()

    def importer(answer, fd):
        if answer.get("device_uuid") != uuid:
            raise GPUDriverError(f"hubproxy staged on {answer.get('device_uuid')}, this process uses {uuid}")
        if fd is not None:
            return VMMImport(cu, fd, int(answer["bytes"]), ordinal, uuid)
        return IPCImport(answer["ipc_handle"])

    return importer


def tensors_of(lease, wrap, make_typed):
    """The lease's tensors, by name, each a view of its staged bytes that
    keeps the lease alive. make_typed(raw, dtype, shape, name) types them."""
    out = {}
    for t in lease.answer["tensors"]:
        n = int(t["bytes"])
        raw = wrap(lease.base + int(t["offset"]), n, lease) if n else None
        out[t["name"]] = make_typed(raw, t["dtype"], t["shape"], t["name"])
    return out


def leases(path=None, token=None, timeout=30.0):
    """The caller's leases as hubproxy lists them (GET /gpu/leases on the
    admin socket): how a consumer checks its tensors' lease ended."""
    path = path or admin_socket()
    if not path:
        raise GPUDriverError("no admin socket: set HUBPROXY_ADMIN_SOCKET")
    _s, _h, body, fds, _sock = request(path, "GET", "/gpu/leases", token=token, timeout=timeout)
    _close_fds(fds)
    try:
        return json.loads(body)["leases"]
    except (ValueError, KeyError, TypeError) as e:
        raise ProtocolError(f"GET /gpu/leases: not a lease list: {e}") from None
