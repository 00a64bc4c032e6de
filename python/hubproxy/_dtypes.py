"""safetensors dtypes as torch dtypes, and tensors built from raw bytes.

Every safetensors dtype maps to torch's name for it; a torch build without
that dtype (Debian's 1.13 has no uint16/32/64 nor float8) and the F6 formats,
which torch has no dtype for, are refused by name, or given as their raw
bytes (a 1-D uint8 tensor) when the caller asks for unsupported="raw".
"""
import torch

from ._errors import UnsupportedDTypeError

TORCH_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64",
    "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64", "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F4": "float4_e2m1fn_x2",  # two values per byte: the last dimension halves
    "F6_E2M3": None, "F6_E3M2": None,
}


def torch_dtype(dtype):
    """The torch dtype for a safetensors dtype, or None where this torch lacks it."""
    name = TORCH_NAMES.get(dtype)
    return getattr(torch, name, None) if name else None


def check_modes(unsupported):
    if unsupported not in ("error", "raw"):
        raise ValueError(f"unsupported must be 'error' or 'raw', not {unsupported!r}")


def torch_shape(dtype, shape, name, unsupported):
    """(torch dtype, torch shape) for the bytes of a tensor, or (None, None)
    when they are to stay raw uint8 bytes; raises UnsupportedDTypeError when
    they can be neither."""
    dt = torch_dtype(dtype)
    shape = list(shape)
    if dt is not None and dtype == "F4":
        if not shape or shape[-1] % 2:
            dt = None  # an odd last dimension has no float4_e2m1fn_x2 shape
        else:
            shape[-1] //= 2
    if dt is None:
        if unsupported == "raw":
            return None, None
        raise UnsupportedDTypeError(dtype, name)
    return dt, shape


def from_bytes(buf, offset, nbytes, dtype, shape, name, unsupported):
    """A CPU tensor over buf[offset:offset+nbytes] (a writable buffer it keeps
    alive), typed and shaped; copied only where the offset is not aligned to
    the element size, which torch kernels assume."""
    dt, tshape = torch_shape(dtype, shape, name, unsupported)
    if nbytes == 0:
        return torch.empty(tshape if dt is not None else [0], dtype=dt if dt is not None else torch.uint8)
    raw = torch.frombuffer(buf, dtype=torch.uint8, count=nbytes, offset=offset)
    if dt is None:
        return raw
    size = torch.empty(0, dtype=dt).element_size()
    if offset % size:
        raw = raw.clone()
    return raw.view(dt).reshape(tshape)


def typed(raw, dtype, shape, name, unsupported):
    """raw (a contiguous uint8 tensor, any device) as its dtype and shape."""
    dt, tshape = torch_shape(dtype, shape, name, unsupported)
    if dt is None:
        return raw
    if raw.numel() == 0:
        return torch.empty(tshape, dtype=dt, device=raw.device)
    return raw.view(dt).reshape(tshape)
