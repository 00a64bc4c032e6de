"""The safetensors header, parsed and checked as the reference reader does
(safetensors' SafeTensors::read_metadata; hubproxy's internal/header), so a
file this package accepts is one safetensors accepts, and a hostile one is
refused with the reference's error name before any tensor byte is trusted:

  1. the file holds at least the 8-byte little-endian header length N;
  2. N <= 100,000,000;  3. 8 + N <= the file's size;
  4. the header is strict UTF-8;  5. it is one JSON object: "__metadata__"
     (null or string→string) and tensors {dtype, shape, data_offsets};
     a repeated tensor name is refused (hubproxy's deviation: the reference
     keeps the last);
  6-7. sorted by offset, each tensor begins where the previous ended and
     holds exactly elements × bits / 8 bytes (whole bytes);
  8. the tensors cover the data buffer exactly: 8 + N + last end == size.
"""
import json
import struct

from ._errors import InvalidSafetensorsError

PREFIX = 8
MAX_HEADER = 100_000_000

# Element width in bits, for every dtype of safetensors 0.8 (internal/header/dtype.go).
BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}


def _bad(kind, reason, tensor=None):
    where = f" (tensor {tensor!r})" if tensor is not None else ""
    return InvalidSafetensorsError(f"invalid safetensors header: {kind}: {reason}{where}", kind=kind, tensor=tensor)


class TensorInfo:
    """One tensor of the header: offsets are relative to the data buffer."""

    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, shape, begin, end

    @property
    def nbytes(self):
        return self.end - self.begin

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype}, {self.shape}, [{self.begin}, {self.end}))"


class Header:
    """A parsed, validated header: tensors by name, in file order, and where
    the data buffer starts in the file."""

    def __init__(self, n, metadata, tensors, size):
        self.header_len = n
        self.data_start = PREFIX + n
        self.metadata = metadata
        self.tensors = {t.name: t for t in tensors}  # file order
        self.size = size


def header_len(prefix):
    """N from the first bytes of a file (checks 1 and 2)."""
    if len(prefix) < PREFIX:
        raise _bad("HeaderTooSmall", "the file is shorter than its 8-byte length prefix")
    n = struct.unpack_from("<Q", prefix)[0]
    if n > MAX_HEADER:
        raise _bad("HeaderTooLarge", f"declared header length {n} exceeds {MAX_HEADER}")
    return n


def _pairs(pairs):
    # Keeps repeats visible: json.loads would silently keep the last one.
    return _Pairs(pairs)


class _Pairs(list):
    pass


def _uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64


def _tensor(name, v):
    if isinstance(v, list) and not isinstance(v, _Pairs) and len(v) == 3:  # serde's sequence form of a struct
        v = _Pairs([("dtype", v[0]), ("shape", v[1]), ("data_offsets", v[2])])
    if not isinstance(v, _Pairs):
        raise _bad("InvalidHeaderDeserialization", "a tensor entry must be an object", name)
    fields = {}
    for k, val in v:
        if k in ("dtype", "shape", "data_offsets"):
            if k in fields:
                raise _bad("InvalidHeaderDeserialization", f"duplicate field `{k}`", name)
            fields[k] = val
    for k in ("dtype", "shape", "data_offsets"):
        if k not in fields:
            raise _bad("InvalidHeaderDeserialization", f"missing field `{k}`", name)
    dtype = fields["dtype"]
    if isinstance(dtype, _Pairs) and len(dtype) == 1 and dtype[0][1] is None:  # serde's {"F32": null}
        dtype = dtype[0][0]
    if not isinstance(dtype, str) or dtype not in BITS:
        raise _bad("InvalidHeaderDeserialization", f"unknown dtype {dtype!r}", name)
    shape, offs = fields["shape"], fields["data_offsets"]
    if not isinstance(shape, list) or not all(_uint(d) for d in shape):
        raise _bad("InvalidHeaderDeserialization", "shape must be an array of unsigned integers", name)
    if not isinstance(offs, list) or len(offs) != 2 or not all(_uint(o) for o in offs):
        raise _bad("InvalidHeaderDeserialization", "data_offsets must be two unsigned integers", name)
    return TensorInfo(name, dtype, list(shape), offs[0], offs[1])


def _metadata(v):
    if v is None:
        return None
    if not isinstance(v, _Pairs) or not all(isinstance(val, str) for _, val in v):
        raise _bad("InvalidHeaderDeserialization", "__metadata__ must be null or an object of strings")
    return dict(v)  # repeated keys inside it: the last wins, as in the reference


def nbytes_of(t):
    """Bytes of dtype × shape (checks 7b-7d)."""
    elems = 1
    for d in t.shape:
        elems *= d
        if elems >= 1 << 64:
            raise _bad("ValidationOverflow", f"shape {t.shape} overflows", t.name)
    bits = elems * BITS[t.dtype]
    if bits >= 1 << 64:
        raise _bad("ValidationOverflow", f"shape {t.shape} overflows", t.name)
    if bits % 8:
        raise _bad("MisalignedSlice", f"{t.dtype}{t.shape} is not a whole number of bytes", t.name)
    return bits // 8


def parse(prefix, size):
    """Parses the header from prefix (the file's first bytes, at least 8 + N
    of them unless the file is shorter) of a file of size bytes."""
    n = header_len(prefix)
    if n > size - PREFIX:
        raise _bad("InvalidHeaderLength", f"header of {n} bytes runs past the end of a {size}-byte file")
    if len(prefix) < PREFIX + n:
        raise ValueError(f"parse needs the first {PREFIX + n} bytes, got {len(prefix)}")
    raw = bytes(prefix[PREFIX:PREFIX + n])
    try:
        text = raw.decode("utf-8", "strict")
    except UnicodeDecodeError as e:
        raise _bad("InvalidHeader", f"not UTF-8 at byte {PREFIX + e.start}") from None
    try:
        doc = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise _bad("InvalidHeaderDeserialization", str(e)) from None
    if not isinstance(doc, _Pairs):
        raise _bad("InvalidHeaderDeserialization", "the header is not a JSON object")
    metadata, seen_meta, tensors, names = None, False, [], set()
    for k, v in doc:
        if k == "__metadata__":
            if seen_meta:
                raise _bad("InvalidHeaderDeserialization", "duplicate field `__metadata__`")
            seen_meta, metadata = True, _metadata(v)
            continue
        tensors.append(_tensor(k, v))
    for t in tensors:
        if t.name in names:
            raise _bad("DuplicateTensor", "the name appears more than once in the header", t.name)
        names.add(t.name)
    tensors.sort(key=lambda t: (t.begin, t.end, t.name))
    cursor = 0
    for t in tensors:
        if t.begin != cursor or t.end < t.begin:
            raise _bad("InvalidOffset", f"data_offsets [{t.begin}, {t.end}], expected it to begin at {cursor}", t.name)
        want = nbytes_of(t)
        if t.end - t.begin != want:
            raise _bad("TensorInvalidInfo", f"{t.dtype}{t.shape} needs {want} bytes, data_offsets give {t.end - t.begin}", t.name)
        cursor = t.end
    if PREFIX + n + cursor != size:
        raise _bad("MetadataIncompleteBuffer",
                   f"tensors end at data offset {cursor}, but the data buffer holds {size - PREFIX - n} bytes")
    return Header(n, metadata, tensors, size)


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")
