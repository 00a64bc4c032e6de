"""An independent reading of safetensors bytes, for comparing with hubproxy's
loader: its own parse (struct + json) and its own dtype table, sharing no
code with the package."""
import json
import struct
import urllib.request

import torch

DT = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32",
      "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
      "F32": "float32", "F64": "float64", "C64": "complex64", "F8_E4M3": "float8_e4m3fn",
      "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2"}


def download(url):
    with urllib.request.urlopen(url) as r:
        return r.read()


class File:
    def __init__(self, data):
        n = struct.unpack("<Q", data[:8])[0]
        hdr = json.loads(data[8:8 + n])
        self.metadata = hdr.pop("__metadata__", None)
        self.entries = hdr
        self.data, self.start = data, 8 + n

    def names(self):
        return sorted(self.entries, key=lambda k: self.entries[k]["data_offsets"][0])

    def raw(self, name):
        lo, hi = self.entries[name]["data_offsets"]
        return self.data[self.start + lo:self.start + hi]

    def dtype(self, name):
        return self.entries[name]["dtype"]

    def shape(self, name):
        return self.entries[name]["shape"]

    def torch_dtype(self, name):
        return getattr(torch, DT.get(self.dtype(name), "-"), None)


def tensor_bytes(t):
    """A tensor's bytes, in row-major order, whatever its dtype."""
    t = t.detach().cpu().contiguous()
    if t.numel() == 0:
        return b""
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()
