"""The staging handover without a GPU: a fake admin socket speaks hubproxy's
protocol (the answer with a descriptor on its first byte, SCM_RIGHTS, the
lease held by the connection), a fake importer stands in for
cuMemImportFromShareableHandle, and CPU tensors stand in for device ones, so
what is tested is the framing, the descriptor's closing on every path and the
lease's lifetime: held while any tensor (or view) lives, ended once freed."""
import gc
import json
import os
import socket
import tempfile
import threading
import unittest

import torch

import hubproxy
from hubproxy import _dtypes, _gpu


def open_fds():
    """This process's open descriptors, as what they are (the listing's own
    descriptor, gone by now, left out)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
        except FileNotFoundError:
            pass
    return out


class FakeAdmin:
    """One connection on a Unix socket, answered as mode says."""

    def __init__(self, mode, answer=None, data=b""):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "admin.sock")
        self.mode, self.answer, self.data = mode, answer, data
        self.request, self.headers, self.released = None, None, threading.Event()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def close(self):
        self.srv.close()
        self.thread.join(5)
        self.dir.cleanup()

    def serve(self):
        try:
            self._serve()
        finally:
            self.released.set()  # once its end of the connection is closed too

    def _serve(self):
        try:
            conn, _ = self.srv.accept()
        except OSError:
            return  # closed before anyone connected
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(4096)
            head, _, body = buf.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            self.headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
            n = int(self.headers["content-length"])
            while len(body) < n:
                body += conn.recv(4096)
            self.request = (lines[0], json.loads(body))
            if self.mode == "silent":
                conn.recv(1)
                return
            status, payload = (200, self.answer) if self.mode in ("ok", "nofd") else (503, {"error": "no CUDA here"})
            raw = json.dumps(payload).encode()
            length = len(raw) + (100 if self.mode == "short" else 0)
            extra = "X-Error-Code: GPUUnavailable\r\n" if status != 200 else ""
            msg = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {length}\r\n\r\n".encode() + raw
            if self.mode == "short":
                conn.sendall(msg)
                return  # and hangs up mid-answer
            if self.mode == "nofd":
                conn.sendall(msg)
            else:
                fd = os.memfd_create("lease")
                os.write(fd, self.data)
                socket.send_fds(conn, [msg[:1]], [fd])
                os.close(fd)  # the consumer has its own copy now
                conn.sendall(msg[1:])
            while conn.recv(4096):  # held: the lease lives until the consumer closes
                pass


class Mem:
    """What the importer 'maps': the descriptor's bytes, at address 4096."""

    def __init__(self, fd, seen):
        seen.append(os.fstat(fd).st_ino)
        self.data, self.base, self.closed = os.pread(fd, 1 << 20, 0), 4096, False

    def close(self):
        self.closed = True


class Leased(bytearray):
    """CPU bytes that, like _gpu._DeviceBytes, keep their lease alive for as
    long as torch keeps them."""


def answer(tensors, total):
    return {"lease": "l1", "device": 0, "device_uuid": "GPU-x", "handover": "fd", "held": True, "bytes": total,
            "commit": "c" * 40, "tensors": tensors}


class Staging(unittest.TestCase):
    def fake(self, mode, ans=None, data=b""):
        f = FakeAdmin(mode, ans, data)
        self.addCleanup(f.close)
        return f

    def test_lease_lives_while_any_tensor_does(self):
        w = torch.arange(6, dtype=torch.float32)
        data = bytearray(512)
        data[0:24] = w.numpy().tobytes()
        data[256:258] = b"\x07\x00"
        ts = [{"name": "w", "dtype": "F32", "shape": [2, 3], "offset": 0, "bytes": 24},
              {"name": "s", "dtype": "I16", "shape": [], "offset": 256, "bytes": 2},
              {"name": "e", "dtype": "F32", "shape": [0, 4], "offset": 512, "bytes": 0}]
        f = self.fake("ok", answer(ts, 512), bytes(data))
        mems, inodes = [], []

        def importer(ans, fd):
            self.assertEqual(ans["lease"], "l1")
            mems.append(Mem(fd, inodes))
            return mems[-1]

        def wrap(ptr, n, lease):
            b = Leased(mems[0].data[ptr - mems[0].base:ptr - mems[0].base + n])
            b.lease = lease
            return torch.frombuffer(b, dtype=torch.uint8)

        before = open_fds()
        lease = _gpu.stage(f.path, {"repo": "org/m", "names": ["w", "s", "e"]}, importer, token="hf_t", timeout=5)
        self.assertEqual(f.request[0], "POST /gpu/stage HTTP/1.1")
        self.assertEqual(f.request[1], {"repo": "org/m", "names": ["w", "s", "e"], "hold": True})
        self.assertEqual(f.headers["authorization"], "Bearer hf_t")
        out = _gpu.tensors_of(lease, wrap, lambda raw, dt, shape, name: _dtypes.typed(
            raw if raw is not None else torch.empty(0, dtype=torch.uint8), dt, shape, name, "error"))
        self.assertTrue(torch.equal(out["w"], w.reshape(2, 3)))
        self.assertEqual(out["s"].item(), 7)
        self.assertEqual(list(out["e"].shape), [0, 4])
        # The descriptor was closed once imported: only the held connection's
        # two ends (ours and the fake's, in this process) are new.
        self.assertEqual(len(open_fds() - before), 2)
        fin = lease._finalizer
        del lease
        gc.collect()
        self.assertTrue(fin.alive)
        view = out["w"][1:]
        del out
        gc.collect()
        self.assertTrue(fin.alive, "a view still uses the memory")
        self.assertFalse(f.released.is_set())
        del view
        gc.collect()
        self.assertFalse(fin.alive)
        self.assertTrue(mems[0].closed)
        self.assertTrue(f.released.wait(5), "hubproxy never saw the lease's connection close")
        self.assertEqual(open_fds() - before, set())

    def test_an_error_answer_closes_everything(self):
        f = self.fake("error")
        before = open_fds()
        with self.assertRaises(hubproxy.GPUUnavailableError) as cm:
            _gpu.stage(f.path, {"repo": "org/m", "names": ["w"]}, lambda a, fd: self.fail("imported"), timeout=5)
        self.assertIn("no CUDA here", str(cm.exception))
        self.assertTrue(f.released.wait(5))
        self.assertEqual(open_fds() - before, set())

    def test_a_failed_import_ends_the_lease_and_closes_the_fd(self):
        f = self.fake("ok", answer([], 0), b"x")

        def importer(ans, fd):
            os.fstat(fd)
            raise hubproxy.GPUDriverError("cuMemImportFromShareableHandle failed")

        before = open_fds()
        with self.assertRaises(hubproxy.GPUDriverError):
            _gpu.stage(f.path, {"repo": "org/m", "names": ["w"]}, importer, timeout=5)
        self.assertTrue(f.released.wait(5))
        self.assertEqual(open_fds() - before, set())

    def test_fd_handover_without_a_descriptor(self):
        f = self.fake("nofd", answer([], 0))
        with self.assertRaises(hubproxy.ProtocolError):
            _gpu.stage(f.path, {"repo": "org/m", "names": ["w"]}, lambda a, fd: None, timeout=5)
        self.assertTrue(f.released.wait(5))

    def test_a_short_answer(self):
        f = self.fake("short", answer([], 0))
        before = open_fds()

        with self.assertRaises(hubproxy.ProtocolError) as cm:
            _gpu.stage(f.path, {"repo": "org/m", "names": ["w"]}, lambda a, fd: None, timeout=5)
        self.assertIn("broke off", str(cm.exception))
        self.assertTrue(f.released.wait(5))
        self.assertEqual(open_fds() - before, set())

    def test_reads_time_out(self):
        f = self.fake("silent")
        with self.assertRaises(TimeoutError):
            _gpu.stage(f.path, {"repo": "org/m", "names": ["w"]}, lambda a, fd: None, timeout=0.3)

    def test_reachable(self):
        f = self.fake("silent")
        self.assertFalse(_gpu.reachable(os.path.join(f.dir.name, "nope.sock")))
        self.assertFalse(_gpu.reachable(None))
        self.assertTrue(_gpu.reachable(f.path))


if __name__ == "__main__":
    unittest.main()
