"""hubproxy.load_file and safe_open against a running hubproxy over the fake
hub, as internal/app/python_loader_test.go (TestPythonLoader) starts them;
skipped only outside it (that test fails on any skip)."""
import gc
import json
import os
import unittest
import urllib.request

import torch

import hubproxy
from hubproxy._http import Client

from . import reference

STATS = os.environ.get("HUBPROXY_TEST_STATS")
UPSTREAM = os.environ.get("HUBPROXY_TEST_UPSTREAM")
CACHE = os.environ.get("HUBPROXY_TEST_CACHE")
REPO = "org/model"
BLOCK = 64 << 10  # apptest.BlockSize


def stats():
    with urllib.request.urlopen(STATS + "/stats") as r:
        return json.load(r)


def reset():
    urllib.request.urlopen(urllib.request.Request(STATS + "/reset", method="POST")).close()


def upstream_bytes(s, filename):
    return sum(n for k, n in (s["upstream_bytes"] or {}).items() if k.endswith("/" + filename))


_refs = {}


def ref(filename, repo=REPO):
    if (repo, filename) not in _refs:
        _refs[repo, filename] = reference.File(reference.download(f"{UPSTREAM}/{repo}/resolve/main/{filename}"))
    return _refs[repo, filename]


@unittest.skipUnless(STATS and UPSTREAM and CACHE, "run by go test -run TestPythonLoader ./internal/app/")
class E2E(unittest.TestCase):
    def assertSameTensor(self, got, rf, name, raw_ok=False):
        want_dt = rf.torch_dtype(name)
        if want_dt is None or (rf.dtype(name) == "F4" and rf.shape(name)[-1] % 2):
            self.assertTrue(raw_ok, f"{name}: {rf.dtype(name)} should have been refused")
            self.assertEqual(got.dtype, torch.uint8, name)
            self.assertEqual(list(got.shape), [len(rf.raw(name))], name)
        else:
            shape = list(rf.shape(name))
            if rf.dtype(name) == "F4":
                shape[-1] //= 2
            self.assertEqual(got.dtype, want_dt, name)
            self.assertEqual(list(got.shape), shape, name)
        self.assertEqual(reference.tensor_bytes(got), rf.raw(name), name)

    def test_load_file_matches_reference(self):
        rf = ref("model.safetensors")
        got = hubproxy.load_file(REPO, "model.safetensors")
        self.assertEqual(list(got), rf.names())
        for name in rf.names():
            self.assertSameTensor(got[name], rf, name)
        with hubproxy.safe_open(REPO, "model.safetensors") as f:
            self.assertEqual(f.metadata(), rf.metadata)
            self.assertEqual(f.keys(), rf.names())

    def test_every_dtype_or_a_clear_refusal(self):
        rf = ref("every.safetensors")
        lacking = [n for n in rf.names() if rf.torch_dtype(n) is None]
        self.assertIn("f6.e2m3", lacking)  # F6 has no torch dtype anywhere
        with self.assertRaises(hubproxy.UnsupportedDTypeError) as cm:
            hubproxy.load_file(REPO, "every.safetensors")
        self.assertIn(rf.dtype(cm.exception.tensor), str(cm.exception))
        self.assertIn(cm.exception.tensor, lacking)
        got = hubproxy.load_file(REPO, "every.safetensors", unsupported="raw")
        self.assertEqual(list(got), rf.names())
        for name in rf.names():
            self.assertSameTensor(got[name], rf, name, raw_ok=True)
        self.assertEqual(got["scalar.i64"].dim(), 0)

    def test_lazy_reads_only_the_header_and_the_asked_tensors(self):
        rf = ref("lazy.safetensors")
        reset()
        with hubproxy.safe_open(REPO, "lazy.safetensors") as f:
            self.assertEqual(f.keys(), rf.names())
            s = stats()
            self.assertEqual([(r["method"], r["range"]) for r in s["proxy"]], [("GET", "bytes=0-65535")])
            self.assertSameTensor(f.get_tensor("i32"), rf, "i32")
            self.assertSameTensor(f.get_tensor("f64"), rf, "f64")
        s = stats()
        gets = [r for r in s["proxy"] if r["method"] == "GET"]
        self.assertEqual(len(gets), 3, s["proxy"])
        self.assertTrue(all("/resolve/" in r["path"] and r["status"] == 206 for r in gets), gets)
        # The header's speculative read and the blocks of two tiny tensors,
        # never the 2 MiB one: at most a few cache blocks upstream.
        served = upstream_bytes(s, "lazy.safetensors")
        self.assertGreater(served, 0)
        self.assertLessEqual(served, 3 * BLOCK, s)

    def test_get_slice_reads_only_its_rows(self):
        rf = ref("slice.safetensors")
        big = torch.frombuffer(bytearray(rf.raw("big.f32")), dtype=torch.float32).reshape(512, 1024)
        reset()
        with hubproxy.safe_open(REPO, "slice.safetensors") as f:
            s = f.get_slice("big.f32")
            self.assertEqual(s.get_shape(), [512, 1024])
            self.assertEqual(s.get_dtype(), "F32")
            rows = s[3:5]
            self.assertEqual(reference.tensor_bytes(rows), reference.tensor_bytes(big[3:5]))
            st = stats()
            served = upstream_bytes(st, "slice.safetensors")
            self.assertLessEqual(served, 4 * BLOCK, st)  # the tensor is 2 MiB
            routes = [r for r in st["proxy"] if "/tensors/" in r["path"]]
            self.assertEqual(len(routes), 1, st["proxy"])
            self.assertIn("slice=3%3A5%2C0%3A1024", routes[0]["query"])
            for key, want in [((-1,), big[-1]), ((slice(None), 5), big[:, 5]), ((slice(1, 3), slice(10, 20)), big[1:3, 10:20]),
                              ((Ellipsis, 7), big[..., 7]), ((slice(9, 9),), big[9:9]), ((slice(500, None),), big[500:])]:
                got = s[key]
                self.assertEqual(list(got.shape), list(want.shape), key)
                self.assertEqual(reference.tensor_bytes(got), reference.tensor_bytes(want), key)
            with self.assertRaises(ValueError):
                s[::2]
            with self.assertRaises(IndexError):
                s[512]
            self.assertEqual(f.get_slice("scalar.i64")[...].dim(), 0)

    def test_shards_over_http_and_from_the_cache(self):
        rf = ref("shard.safetensors")
        for world in (1, 3, 4):
            for rank in range(world):
                got = hubproxy.load_file(REPO, "shard.safetensors", shard=(rank, world))
                for name in rf.names():
                    raw = rf.raw(name)
                    full = torch.frombuffer(bytearray(raw), dtype=rf.torch_dtype(name)).reshape(rf.shape(name)) \
                        if raw else torch.empty(rf.shape(name), dtype=rf.torch_dtype(name))
                    n = rf.shape(name)[0]
                    want = full[n * rank // world:n * (rank + 1) // world]
                    self.assertEqual(list(got[name].shape), list(want.shape), (name, rank, world))
                    self.assertEqual(reference.tensor_bytes(got[name]), reference.tensor_bytes(want), (name, rank, world))
        rf = ref("model.safetensors")
        emb = torch.frombuffer(bytearray(rf.raw("embed.weight")), dtype=torch.float32).reshape(256, 1024)
        for cache in (None, CACHE):
            with hubproxy.safe_open(REPO, "model.safetensors", cache_dir=cache) as f:
                self.assertEqual(f.source, "cache" if cache else "http")
                got = f.get_tensor("embed.weight", shard=(1, 1, 3))  # columns [341, 682)
                self.assertEqual(reference.tensor_bytes(got), reference.tensor_bytes(emb[:, 341:682]))
            # A 0-d tensor has no dimension 0 to split: refused, as hubproxy's route does.
            with self.assertRaises(hubproxy.BadRequestError) as cm:
                hubproxy.load_file(REPO, "model.safetensors", shard=(0, 2), cache_dir=cache)
            self.assertIn("scalar", str(cm.exception))

    def test_cache_mmap_reads_no_bytes_over_http(self):
        rf = ref("model.safetensors")
        with hubproxy.safe_open(REPO, "model.safetensors") as f:
            commit = f.commit
        reset()
        got = hubproxy.load_file(REPO, "model.safetensors", revision=commit, cache_dir=CACHE)
        self.assertEqual(stats()["proxy"], [])  # pinned to a commit: no request at all
        for name in rf.names():
            self.assertSameTensor(got[name], rf, name)
        got["embed.weight"].fill_(0)  # private pages: the cached blob is not touched
        del got
        gc.collect()
        got = hubproxy.load_file(REPO, "model.safetensors", cache_dir=CACHE)
        self.assertEqual({r["method"] for r in stats()["proxy"]}, {"HEAD"})  # which commit main is; no bytes
        self.assertSameTensor(got["embed.weight"], rf, "embed.weight")
        with hubproxy.safe_open(REPO, "model.safetensors", cache_dir=CACHE) as f:
            self.assertEqual(f.source, "cache")
            self.assertSameTensor(f.get_slice("embed.weight")[7:9], _sub(rf, "embed.weight", 7, 9), "embed.weight")

    def test_a_partial_blob_is_never_read(self):
        partial_dir = os.path.join(CACHE, ".hubproxy", "partial")
        self.assertTrue(any(not n.endswith(".json") for n in os.listdir(partial_dir)), "the Go side left a partial")
        rf = ref("partial.safetensors")
        reset()
        with hubproxy.safe_open(REPO, "partial.safetensors", cache_dir=CACHE) as f:
            self.assertEqual(f.source, "http")
            self.assertSameTensor(f.get_tensor("embed.weight"), rf, "embed.weight")
        self.assertTrue(any(r["method"] == "GET" and r["range"] for r in stats()["proxy"]))

    def test_gated_repo(self):
        with self.assertRaises(hubproxy.GatedRepoError) as cm:
            hubproxy.load_file("org/gated", "model.safetensors", token=False)
        self.assertEqual(cm.exception.status, 401)
        with self.assertRaises(hubproxy.GatedRepoError) as cm:
            hubproxy.load_file("org/gated", "model.safetensors", token="hf_not_approved")
        self.assertEqual(cm.exception.status, 403)
        # The cache does not bypass the check where a revision must be resolved.
        with self.assertRaises(hubproxy.GatedRepoError):
            hubproxy.load_file("org/gated", "model.safetensors", token=False, cache_dir=CACHE)
        rf = ref("model.safetensors")
        got = hubproxy.load_file("org/gated", "model.safetensors", token="hf_approved")
        self.assertEqual(list(got), ["mask", "embed.weight", "scalar", "norm.bf16"])
        self.assertEqual(reference.tensor_bytes(got["embed.weight"]), rf.raw("embed.weight"))

    def test_refusals(self):
        with self.assertRaises(hubproxy.EntryNotFoundError):
            hubproxy.load_file(REPO, "nope.safetensors")
        with self.assertRaises(hubproxy.RepositoryNotFoundError):
            hubproxy.load_file("org/nope", "model.safetensors")
        with self.assertRaises(hubproxy.RevisionNotFoundError):
            hubproxy.load_file(REPO, "model.safetensors", revision="nope")
        with hubproxy.safe_open(REPO, "model.safetensors") as f:
            with self.assertRaises(hubproxy.EntryNotFoundError):
                f.get_tensor("nope")
        with self.assertRaises(hubproxy.RangeNotSatisfiableError):
            with Client() as c:
                c.read_range("/org/model/resolve/main/config.json", 1000, 1010)

    def test_hostile_headers(self):
        with self.assertRaises(hubproxy.InvalidSafetensorsError) as cm:
            hubproxy.safe_open(REPO, "bad.safetensors")
        self.assertEqual((cm.exception.kind, cm.exception.tensor), ("InvalidOffset", "b"))
        with self.assertRaises(hubproxy.InvalidSafetensorsError) as cm:
            hubproxy.load_file(REPO, "huge.safetensors")
        self.assertEqual(cm.exception.kind, "HeaderTooLarge")
        # hubproxy refuses the file the same way on its tensor route: 502 InvalidSafetensors.
        with self.assertRaises(hubproxy.InvalidSafetensorsError) as cm:
            with Client() as c:
                c.request("GET", "/models/org/model/tensors/a?file=bad.safetensors")
        self.assertEqual((cm.exception.status, cm.exception.code), (502, "InvalidSafetensors"))
        # And hubproxy keeps serving.
        self.assertEqual(len(hubproxy.load_file(REPO, "model.safetensors")), len(ref("model.safetensors").names()))


def _sub(rf, name, lo, hi):
    """A reference.File-like view of rows [lo, hi) of name."""
    shape = rf.shape(name)
    row = len(rf.raw(name)) // shape[0]

    class Sub:
        def torch_dtype(self, _):
            return rf.torch_dtype(name)

        def dtype(self, _):
            return rf.dtype(name)

        def shape(self, _):
            return [hi - lo] + shape[1:]

        def raw(self, _):
            return rf.raw(name)[lo * row:hi * row]

    return Sub()
