"""The header parser's rules, on hand-made valid and hostile headers."""
import json
import struct
import unittest

from hubproxy import InvalidSafetensorsError
from hubproxy._header import parse


def file_of(header, data_len=None, raw=None):
    text = raw if raw is not None else json.dumps(header).encode()
    if data_len is None:
        data_len = max([v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"] or [0])
    return struct.pack("<Q", len(text)) + text + bytes(data_len)


def kind(data, size=None):
    try:
        parse(data, len(data) if size is None else size)
    except InvalidSafetensorsError as e:
        return e.kind
    return None


class Header(unittest.TestCase):
    def test_valid(self):
        b = file_of({"__metadata__": {"format": "pt"},
                     "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [3, 19]},
                     "m": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]},
                     "e": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [19, 19]},
                     "s": {"dtype": "I64", "shape": [], "data_offsets": [19, 27]},
                     "f4": {"dtype": "F4", "shape": [2, 3], "data_offsets": [27, 30]},
                     "f6": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [30, 33]}})
        h = parse(b, len(b))
        self.assertEqual(list(h.tensors), ["m", "w", "e", "s", "f4", "f6"])  # file order
        self.assertEqual(h.metadata, {"format": "pt"})
        self.assertEqual((h.tensors["w"].begin, h.tensors["w"].end, h.tensors["w"].shape), (3, 19, [2, 2]))
        self.assertEqual(h.data_start, len(b) - 33)

    def test_serde_forms(self):
        # The reference also accepts [dtype, shape, offsets] and {"F32": null}.
        b = file_of(None, 8, raw=b'{"a":["F32",[1],[0,4]],"b":{"dtype":{"F32":null},"shape":[1],"data_offsets":[4,8]},"__metadata__":null}')
        h = parse(b, len(b))
        self.assertEqual([t.dtype for t in h.tensors.values()], ["F32", "F32"])
        self.assertIsNone(h.metadata)

    def test_hostile(self):
        t = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
        cases = {
            "HeaderTooSmall": b"\x01\x00",
            "HeaderTooLarge": struct.pack("<Q", 100_000_001) + b"{}",
            "InvalidHeaderLength": struct.pack("<Q", 50) + b"{}",
            "InvalidHeader": file_of(None, 0, raw=b'{"\xff":1}'),
            "InvalidHeaderDeserialization": file_of(None, 0, raw=b"[1,2]"),
        }
        for want, data in cases.items():
            self.assertEqual(kind(data), want, want)
        bad = {
            "not json": (b"{", "InvalidHeaderDeserialization"),
            "trailing": (b'{} x', "InvalidHeaderDeserialization"),
            "NaN": (b'{"a":{"dtype":"F32","shape":[NaN],"data_offsets":[0,0]}}', "InvalidHeaderDeserialization"),
            "dup tensor": (b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', "DuplicateTensor"),
            "dup metadata": (b'{"__metadata__":{},"__metadata__":{}}', "InvalidHeaderDeserialization"),
            "metadata int": (b'{"__metadata__":{"a":1}}', "InvalidHeaderDeserialization"),
            "dup field": (b'{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', "InvalidHeaderDeserialization"),
            "missing field": (b'{"a":{"dtype":"F32","shape":[2]}}', "InvalidHeaderDeserialization"),
            "unknown dtype": (b'{"a":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}}', "InvalidHeaderDeserialization"),
            "negative dim": (b'{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', "InvalidHeaderDeserialization"),
            "bool dim": (b'{"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}}', "InvalidHeaderDeserialization"),
            "three offsets": (b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}', "InvalidHeaderDeserialization"),
            "deep": (b"[" * 100000 + b"]" * 100000, "InvalidHeaderDeserialization"),
        }
        for what, (raw, want) in bad.items():
            self.assertEqual(kind(file_of(None, 8, raw=raw)), want, what)
        offsets = {
            "overlap": ({"a": t, "b": {**t, "data_offsets": [4, 12]}}, 12, "InvalidOffset"),
            "gap": ({"a": {**t, "data_offsets": [4, 12]}}, 12, "InvalidOffset"),
            "end before begin": ({"a": {**t, "data_offsets": [8, 0]}, "b": {**t, "data_offsets": [0, 8]}}, 8, "InvalidOffset"),
            "size": ({"a": {**t, "data_offsets": [0, 12]}}, 12, "TensorInvalidInfo"),
            "short buffer": ({"a": t}, 4, "MetadataIncompleteBuffer"),
            "long buffer": ({"a": t}, 9, "MetadataIncompleteBuffer"),
            "sub-byte": ({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, 2, "MisalignedSlice"),
            "overflow": ({"a": {"dtype": "F32", "shape": [1 << 32, 1 << 32, 0], "data_offsets": [0, 0]}}, 0, "ValidationOverflow"),
        }
        for what, (h, n, want) in offsets.items():
            self.assertEqual(kind(file_of(h, n)), want, what)

    def test_error_names_the_rule_and_tensor(self):
        t = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
        with self.assertRaises(InvalidSafetensorsError) as cm:
            b = file_of({"a": t, "b": {**t, "data_offsets": [4, 12]}}, 12)
            parse(b, len(b))
        self.assertIn("InvalidOffset", str(cm.exception))
        self.assertIn("'b'", str(cm.exception))
        self.assertIsInstance(cm.exception, ValueError)


if __name__ == "__main__":
    unittest.main()
