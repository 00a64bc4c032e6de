"""The loader on a cache directory alone (pinned to a commit, so no HTTP: the
endpoint is a closed port): typed tensors, raw bytes of dtypes torch lacks,
slices and shards cut from the mapping, sub-byte dtypes on byte boundaries."""
import json
import os
import struct
import tempfile
import unittest

import torch

import hubproxy

C = "c" * 40
NOWHERE = "http://127.0.0.1:9"  # nothing listens: any HTTP request fails the test


def safetensors(tensors):
    """tensors: [(name, dtype, shape, bytes)] in file order."""
    header, off = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


class Local(unittest.TestCase):
    def setUp(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.root = d.name
        self.i32 = torch.arange(30, dtype=torch.int32).reshape(10, 3)
        self.f4 = bytes(range(12))  # F4 [3, 8]: 4 bytes a row
        self.tensors = [
            ("mask", "BOOL", [3], b"\x01\x00\x01"),
            ("i32", "I32", [10, 3], self.i32.numpy().tobytes()),
            ("f4", "F4", [3, 8], self.f4),
            ("f6", "F6_E3M2", [4], b"\x01\x02\x03"),
            ("u16", "U16", [2], b"\x01\x00\xff\xff"),
            ("s", "F64", [], struct.pack("<d", 2.5)),
        ]
        repo = os.path.join(self.root, "models--org--m")
        os.makedirs(os.path.join(repo, "blobs"))
        os.makedirs(os.path.join(repo, "snapshots", C))
        with open(os.path.join(repo, "blobs", "e" * 64), "wb") as f:
            f.write(safetensors(self.tensors))
        os.symlink("../../blobs/" + "e" * 64, os.path.join(repo, "snapshots", C, "m.safetensors"))

    def open(self, **kw):
        return hubproxy.safe_open("org/m", "m.safetensors", revision=C, cache_dir=self.root, endpoint=NOWHERE, **kw)

    def test_typed_and_raw(self):
        with self.open(unsupported="raw") as f:
            self.assertEqual(f.source, "cache")
            self.assertEqual(f.keys(), [t[0] for t in self.tensors])
            self.assertTrue(torch.equal(f.get_tensor("i32"), self.i32))
            self.assertEqual(f.get_tensor("mask").tolist(), [True, False, True])
            self.assertEqual(f.get_tensor("s").item(), 2.5)
            f6 = f.get_tensor("f6")
            self.assertEqual((f6.dtype, f6.tolist()), (torch.uint8, [1, 2, 3]))
        got = hubproxy.load_file("org/m", "m.safetensors", revision=C, cache_dir=self.root, endpoint=NOWHERE,
                                 unsupported="raw")
        self.assertTrue(torch.equal(got["i32"], self.i32))
        if not hasattr(torch, "uint16"):
            self.assertEqual(got["u16"].tolist(), [1, 0, 255, 255])
        with self.assertRaises(hubproxy.UnsupportedDTypeError) as cm:
            hubproxy.load_file("org/m", "m.safetensors", revision=C, cache_dir=self.root, endpoint=NOWHERE)
        self.assertIn(cm.exception.dtype, ("U16", "F4", "F6_E3M2"))

    def test_slices_and_shards_from_the_mapping(self):
        with self.open(unsupported="raw") as f:
            s = f.get_slice("i32")
            self.assertTrue(torch.equal(s[2:5], self.i32[2:5]))
            self.assertTrue(torch.equal(s[:, 1], self.i32[:, 1]))
            self.assertTrue(torch.equal(s[-1, 1:], self.i32[-1, 1:]))
            for rank in range(3):
                want = self.i32[10 * rank // 3:10 * (rank + 1) // 3]
                self.assertTrue(torch.equal(f.get_tensor("i32", shard=(rank, 3)), want))
                self.assertTrue(torch.equal(f.get_tensor("i32", shard=f"1:{rank}/3"), self.i32[:, rank:rank + 1]))
            # F4 rows are 4 bytes: whole rows, and byte-aligned columns, slice; half a byte does not.
            if not hasattr(torch, "float4_e2m1fn_x2"):
                self.assertEqual(bytes(f.get_slice("f4")[1:3].tolist()), self.f4[4:12])
                self.assertEqual(bytes(f.get_slice("f4")[:, 2:6].tolist()), bytes([1, 2, 5, 6, 9, 10]))
            with self.assertRaises(hubproxy.BadRequestError):
                f.get_slice("f4")[:, 1:4]
            with self.assertRaises(hubproxy.BadRequestError):
                f.get_tensor("s", shard=(0, 2))
            with self.assertRaises(hubproxy.BadRequestError):
                f.get_tensor("i32", shard=(2, 2))
            self.assertEqual(f.get_slice("s")[...].item(), 2.5)

    def test_writes_stay_private(self):
        with self.open() as f:
            f.get_tensor("i32").fill_(7)
        with self.open() as f:
            self.assertTrue(torch.equal(f.get_tensor("i32"), self.i32))

    def test_uncached_commit_goes_to_http(self):
        with self.assertRaises(hubproxy.UpstreamError):  # the closed port, after retries
            hubproxy.safe_open("org/m", "other.safetensors", revision=C, cache_dir=self.root,
                               endpoint=NOWHERE)


if __name__ == "__main__":
    unittest.main()
