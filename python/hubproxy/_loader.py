"""load_file and safe_open, backed by hubproxy.

A file is read, in this order of preference, from:
  - hubproxy's cache directory (cache_dir= or HUBPROXY_CACHE_DIR) by mmap,
    when it holds the file whole (_cache.py): no byte comes over HTTP;
  - else HTTP: one ranged GET for the header (a second only for a header
    over 64 KiB, as hubproxy reads it), then ranges of only the tensors asked
    for; shards and slices through hubproxy's tensor route
    (GET /models/{repo}/tensors/{name}?shard=|slice=), which fetches the
    fewest byte ranges that hold them.
With device="cuda:N" and hubproxy's admin socket reachable, load_file has
hubproxy stage the tensors onto the GPU instead (_gpu.py).
"""
import concurrent.futures
import json
import os
import re
import urllib.parse
import warnings

import torch

from . import _cache, _dtypes, _gpu, _header
from ._errors import BadRequestError, EntryNotFoundError, RangeNotSatisfiableError
from ._http import Client, resolve_path

SPECULATIVE = 64 << 10  # hubproxy's own first header read (internal/tensor)
CHUNK = 16 << 20  # one ranged GET of a whole-file load
WORKERS = 8
_SHARD = re.compile(r"(\d+):(\d+)/(\d+)")


def shard_spec(shard):
    """None, (rank, world) (dimension 0), (dim, rank, world) or "dim:rank/world"
    as hubproxy's "dim:rank/world"; refuses anything else."""
    if shard is None:
        return None
    if isinstance(shard, str):
        m = _SHARD.fullmatch(shard)
        if not m:
            raise BadRequestError(f"shard {shard!r} is not dim:rank/world")
        dim, rank, world = map(int, m.groups())
    elif isinstance(shard, (tuple, list)) and len(shard) in (2, 3) and all(isinstance(x, int) for x in shard):
        dim, rank, world = (0, *shard) if len(shard) == 2 else shard
    else:
        raise BadRequestError(f"shard {shard!r}: want (rank, world), (dim, rank, world) or 'dim:rank/world'")
    if world < 1 or not 0 <= rank < world or dim < 0:
        raise BadRequestError(f"shard {shard!r}: need world >= 1, 0 <= rank < world, dim >= 0")
    return dim, rank, world


def _slice_bytes(raw, t, bounds):
    """The bytes of t[bounds] (one (start, stop) per dimension) from raw, the
    tensor's whole bytes as a 1-D uint8 tensor: as safetensors' slicer, in
    whole bytes, so sub-byte dtypes slice only on byte boundaries."""
    bits = _header.BITS[t.dtype]
    shape = list(t.shape)
    if not shape:
        return raw
    if bits % 8 == 0:
        view = raw.reshape(shape + [bits // 8])
        idx = tuple(slice(a, b) for a, b in bounds)
    else:
        for d, (a, b) in enumerate(bounds):
            whole = (a, b) == (0, shape[d])
            if d == len(shape) - 1 and not whole and (a * bits % 8 or b * bits % 8):
                raise BadRequestError(f"slicing the last dimension of {t.name!r} ({t.dtype}) at [{a}, {b}) "
                                      f"does not fall on byte boundaries (MisalignedSlice)")
        view = raw.reshape(shape[:-1] + [shape[-1] * bits // 8])
        idx = tuple(slice(a, b) for a, b in bounds[:-1]) + (slice(bounds[-1][0] * bits // 8, bounds[-1][1] * bits // 8),)
    return view[idx].contiguous().reshape(-1)


class SafeOpen:
    """A safetensors file of a repo, opened lazily: see safe_open."""

    def __init__(self, repo, filename, framework="pt", device="cpu", revision=None, endpoint=None,
                 token=None, cache_dir=None, unsupported="error"):
        if framework not in ("pt", "torch"):
            raise ValueError(f"framework {framework!r}: only 'pt' is supported")
        _dtypes.check_modes(unsupported)
        self.repo, self.filename, self.device = repo, filename, torch.device(device)
        self.unsupported = unsupported
        self.revision = revision or "main"
        self.client = Client(endpoint, token)
        self.buf = None  # the mmap, when the cache holds the file
        self.commit = self.revision if _cache.is_commit(self.revision) else None
        self.source = None
        try:
            cd = _cache.cache_dir_of(cache_dir)
            if cd is not None:
                self._open_cached(cd)
            if self.buf is None:
                self._open_http()
        except BaseException:
            self.client.close()
            raise

    # ---- opening --------------------------------------------------------------

    def _open_cached(self, cd):
        etag = size = None
        if self.commit is None:
            if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
                self.commit = _cache.ref_commit(cd, self.repo, self.revision)
            else:
                # Which commit the revision is now, with hubproxy checking this
                # caller's access: a HEAD, no file bytes.
                r = self.client.request("HEAD", resolve_path(self.repo, self.revision, self.filename))
                self.commit = r.headers.get("X-Repo-Commit")
                etag = (r.headers.get("X-Linked-Etag") or r.headers.get("ETag") or "").removeprefix("W/").strip('"') or None
                ls = r.headers.get("X-Linked-Size") or r.headers.get("Content-Length")
                size = int(ls) if ls and ls.isdigit() else None
        if not self.commit:
            return
        path = _cache.complete_file(cd, self.repo, self.commit, self.filename, etag=etag, size=size)
        buf = _cache.map_file(path) if path else None
        if buf is None:
            return
        if len(buf) < _header.PREFIX:
            self.header = _header.parse(bytes(buf), len(buf))  # HeaderTooSmall
        else:
            end = min(_header.PREFIX + _header.header_len(buf[:_header.PREFIX]), len(buf))
            self.header = _header.parse(buf[:end], len(buf))
        self.buf, self.source = buf, "cache"

    def _open_http(self):
        path = resolve_path(self.repo, self.commit or self.revision, self.filename)
        try:
            prefix, size, headers = self.client.prefix(path, SPECULATIVE)
        except RangeNotSatisfiableError:
            prefix, size, headers = b"", 0, {}  # an empty file: HeaderTooSmall below
        self.commit = self.commit or (headers.get("X-Repo-Commit") if headers else None)
        n = _header.header_len(prefix)
        end = _header.PREFIX + n
        if len(prefix) < end <= size:
            prefix = bytes(prefix) + bytes(self.client.read_range(path, len(prefix), end))
        self.header = _header.parse(prefix, size)
        # From here on, pinned to the commit: a branch moving meanwhile cannot mix two versions.
        self.path = resolve_path(self.repo, self.commit or self.revision, self.filename)
        self.source = "http"

    # ---- safetensors' safe_open API ---------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.client.close()

    def keys(self):
        return list(self.header.tensors)

    def metadata(self):
        return self.header.metadata

    def _info(self, name):
        t = self.header.tensors.get(name)
        if t is None:
            raise EntryNotFoundError(f"no tensor {name!r} in {self.repo}/{self.filename}")
        return t

    def get_tensor(self, name, shard=None):
        """Tensor name, whole or (shard=) one tensor-parallel part of it."""
        t = self._info(name)
        spec = shard_spec(shard)
        if spec is not None:
            return self._to(self._shard(t, spec))
        if self.buf is not None:
            return self._to(self._typed_at(self.buf, self.header.data_start + t.begin, t))
        data = self.client.read_range(self.path, self.header.data_start + t.begin, self.header.data_start + t.end)
        return self._to(self._typed_at(data, 0, t))

    def get_slice(self, name):
        return Slice(self, self._info(name))

    # ---- internals ------------------------------------------------------------

    def _to(self, x):
        return x if self.device.type == "cpu" else x.to(self.device)

    def _typed_at(self, buf, offset, t):
        return _dtypes.from_bytes(buf, offset, t.nbytes, t.dtype, t.shape, t.name, self.unsupported)

    def _raw(self, t):
        """t's whole bytes as a 1-D uint8 tensor (mmap path: a view)."""
        if t.nbytes == 0:
            return torch.empty(0, dtype=torch.uint8)
        return torch.frombuffer(self.buf, dtype=torch.uint8, count=t.nbytes, offset=self.header.data_start + t.begin)

    def _route(self, name, **q):
        query = urllib.parse.urlencode({"revision": self.commit or self.revision, "file": self.filename, **q})
        return f"/models/{self.repo}/tensors/{urllib.parse.quote(name, safe='/')}?{query}"

    def _fetch_part(self, t, **q):
        """A shard or slice of t through hubproxy's tensor route: its bytes
        and the shape hubproxy says they have."""
        r = self.client.request("GET", self._route(t.name, **q))
        shape = json.loads(r.headers.get("X-Tensor-Shape") or "null")
        if not isinstance(shape, list) or r.headers.get("X-Tensor-Dtype") != t.dtype:
            from ._errors import ProtocolError
            raise ProtocolError(f"{t.name}: the tensor route answered dtype {r.headers.get('X-Tensor-Dtype')!r}, "
                                f"shape {r.headers.get('X-Tensor-Shape')!r}")
        return bytearray(r.body), shape

    def _shard(self, t, spec):
        dim, rank, world = spec
        if dim >= len(t.shape):
            raise BadRequestError(f"shard {dim}:{rank}/{world}: dimension {dim} does not exist in "
                                  f"{t.name!r}, a tensor of rank {len(t.shape)} (InvalidShard)")
        size = t.shape[dim]
        bounds = [(0, d) for d in t.shape]
        bounds[dim] = (size * rank // world, size * (rank + 1) // world)
        if self.buf is None:
            data, shape = self._fetch_part(t, shard=f"{dim}:{rank}/{world}")
            return _dtypes.from_bytes(data, 0, len(data), t.dtype, shape, t.name, self.unsupported)
        raw = _slice_bytes(self._raw(t), t, bounds)
        return _dtypes.typed(raw, t.dtype, [b - a for a, b in bounds], t.name, self.unsupported)

    def load_all(self, shard=None):
        """Every tensor, in file order (load_file's CPU path)."""
        spec = shard_spec(shard)
        ts = list(self.header.tensors.values())
        if spec is not None:
            with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
                return dict(zip((t.name for t in ts), pool.map(lambda t: self._shard(t, spec), ts)))
        for t in ts:  # refuse before fetching anything
            _dtypes.torch_shape(t.dtype, t.shape, t.name, self.unsupported)
        if self.buf is not None:
            return {t.name: self._typed_at(self.buf, self.header.data_start + t.begin, t) for t in ts}
        ds, size = self.header.data_start, self.header.size
        data = bytearray(size - ds)
        view = memoryview(data)
        spans = [(s, min(s + CHUNK, size)) for s in range(ds, size, CHUNK)]
        with concurrent.futures.ThreadPoolExecutor(min(WORKERS, max(1, len(spans)))) as pool:
            list(pool.map(lambda sp: self.client.read_range(self.path, sp[0], sp[1], into=view[sp[0] - ds:sp[1] - ds]), spans))
        return {t.name: self._typed_at(data, t.begin, t) for t in ts}


class Slice:
    """safetensors' PySafeSlice: the shape and dtype of a tensor, and its
    parts by numpy-like indexing, reading only the bytes they need."""

    def __init__(self, f, t):
        self._f, self._t = f, t

    def get_shape(self):
        return list(self._t.shape)

    def get_dtype(self):
        return self._t.dtype

    def __getitem__(self, key):
        t, f = self._t, self._f
        shape = list(t.shape)
        if not isinstance(key, tuple):
            key = (key,)
        if not shape:
            if any(k is not Ellipsis for k in key):
                raise IndexError(f"{t.name!r} is 0-d: only [...] or [()] index it")
            return f.get_tensor(t.name)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
        if len(key) > len(shape):
            raise IndexError(f"{len(key)} indices for {t.name!r}, a tensor of rank {len(shape)} (TooManySlices)")
        bounds, keep = [], []
        for d, k in enumerate(key + (slice(None),) * (len(shape) - len(key))):
            if isinstance(k, int) and not isinstance(k, bool):
                i = k + shape[d] if k < 0 else k
                if not 0 <= i < shape[d]:
                    raise IndexError(f"index {k} is out of range for dimension {d} of {t.name!r} (size {shape[d]})")
                bounds.append((i, i + 1))
                keep.append(False)
            elif isinstance(k, slice):
                a, b, step = k.indices(shape[d])
                if step != 1:
                    raise ValueError(f"slicing {t.name!r}: only step 1 is supported, not {k.step}")
                bounds.append((a, max(a, b)))
                keep.append(True)
            else:
                raise TypeError(f"cannot index {t.name!r} with {k!r}")
        out_shape = [b - a for a, b in bounds]
        final = [n for n, k in zip(out_shape, keep) if k]
        dt, _ = _dtypes.torch_shape(t.dtype, out_shape, t.name, f.unsupported)  # refuses before any fetch
        if f.buf is not None:
            x = _dtypes.typed(_slice_bytes(f._raw(t), t, bounds), t.dtype, out_shape, t.name, f.unsupported)
        elif 0 in out_shape:
            x = _dtypes.typed(torch.empty(0, dtype=torch.uint8), t.dtype, out_shape, t.name, f.unsupported)
        else:
            spec = ",".join(f"{a}:{b}" for a, b in bounds)
            data, got = f._fetch_part(t, slice=spec)
            x = _dtypes.from_bytes(data, 0, len(data), t.dtype, got, t.name, f.unsupported)
        if dt is not None:  # typed: drop the dimensions an integer index took
            if t.dtype == "F4" and keep[-1]:
                final[-1] //= 2
            x = x.reshape(final)
        return f._to(x)


def safe_open(repo, filename, framework="pt", device="cpu", revision=None, endpoint=None, token=None,
              cache_dir=None, unsupported="error"):
    """Like safetensors.safe_open, for filename of a hub repo through hubproxy:

        with hubproxy.safe_open("org/model", "model.safetensors") as f:
            w = f.get_tensor("lm_head.weight")
            rows = f.get_slice("embed.weight")[0:128]

    Opening reads only the header; get_tensor and get_slice read only what
    they return. unsupported="raw" gives tensors of dtypes this torch lacks
    as their bytes (1-D uint8) instead of raising UnsupportedDTypeError."""
    return SafeOpen(repo, filename, framework, device, revision, endpoint, token, cache_dir, unsupported)


def load_file(repo, filename, device="cpu", revision=None, shard=None, endpoint=None, token=None,
              cache_dir=None, unsupported="error"):
    """Like safetensors.torch.load_file: every tensor of filename, by name.
    shard=(rank, world) (or (dim, rank, world), or "dim:rank/world") gives
    each tensor's tensor-parallel part, as hubproxy's shard= does. On
    device="cuda:N", with hubproxy's admin socket (HUBPROXY_ADMIN_SOCKET)
    reachable, hubproxy stages them onto the GPU: the lease lives as long as
    any of the tensors. Otherwise they are loaded here, then moved."""
    dev = torch.device(device)
    spec = shard_spec(shard)
    with safe_open(repo, filename, "pt", "cpu", revision, endpoint, token, cache_dir, unsupported) as f:
        if dev.type == "cuda":
            sock = _gpu.admin_socket()
            if _gpu.reachable(sock):
                try:
                    return _staged(f, sock, dev, spec)
                except ImportError as e:
                    warnings.warn(f"hubproxy: no CUDA bindings ({e}); loading on the CPU, then copying", stacklevel=2)
        out = f.load_all(spec)
    return out if dev.type == "cpu" else {k: v.to(dev) for k, v in out.items()}


def _staged(f, sock, dev, spec):
    from ._errors import GPUUnavailableError

    ordinal = dev.index if dev.index is not None else torch.cuda.current_device()
    names = list(f.header.tensors)
    for t in f.header.tensors.values():
        _dtypes.torch_shape(t.dtype, t.shape, t.name, f.unsupported)
    torch.cuda.set_device(ordinal)
    torch.zeros(1, device=dev)  # makes the primary context current here
    cu = _gpu.cuda_driver()
    _gpu._check(cu, cu.cuInit(0), "cuInit")
    uuid = _gpu.device_uuid(cu, ordinal)
    body = {"repo": f.repo, "revision": f.commit or f.revision, "file": f.filename, "names": names,
            "device": uuid, "handover": "auto"}
    if spec is not None:
        body["shard"] = "{}:{}/{}".format(*spec)
    try:
        lease = _gpu.stage(sock, body, _gpu.cuda_importer(ordinal, uuid), token=f.client.token)
    except GPUUnavailableError as e:
        warnings.warn(f"hubproxy: {e}; loading on the CPU, then copying", stacklevel=3)
        out = f.load_all(spec)
        return {k: v.to(dev) for k, v in out.items()}
    device = torch.device("cuda", ordinal)

    def make(raw, dtype, shape, name):
        if raw is None:
            raw = torch.empty(0, dtype=torch.uint8, device=device)
        return _dtypes.typed(raw, dtype, shape, name, f.unsupported)

    out = _gpu.tensors_of(lease, _gpu.cuda_wrap(device), make)
    order = {n: i for i, n in enumerate(names)}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], 0)))
