"""Which files of a cache directory are used: only complete blobs, reached
through a snapshot link, as hubproxy promotes them (internal/cache)."""
import os
import tempfile
import unittest

from hubproxy import _cache

C = "a" * 40
E = "e" * 64


class Cache(unittest.TestCase):
    def setUp(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.root = d.name
        self.repo = os.path.join(self.root, "models--org--m")
        for sub in ("blobs", f"snapshots/{C}/sub", "refs/refs/pr", ".x"):
            os.makedirs(os.path.join(self.repo, sub), exist_ok=True)
        os.makedirs(os.path.join(self.root, ".hubproxy", "partial"))
        with open(os.path.join(self.repo, "blobs", E), "wb") as f:
            f.write(b"0123456789")
        with open(os.path.join(self.root, ".hubproxy", "partial", "models--org--m--" + E), "wb") as f:
            f.write(b"01234")
        with open(os.path.join(self.repo, "refs", "main"), "w") as f:
            f.write(C)
        with open(os.path.join(self.repo, "refs", "refs", "pr", "1"), "w") as f:
            f.write(C)

    def link(self, path, target):
        os.symlink(target, os.path.join(self.repo, "snapshots", C, path))

    def test_complete_blob_through_its_link(self):
        self.link("sub/m.safetensors", "../../../blobs/" + E)
        want = os.path.realpath(os.path.join(self.repo, "blobs", E))
        self.assertEqual(_cache.complete_file(self.root, "org/m", C, "sub/m.safetensors"), want)
        self.assertEqual(_cache.complete_file(self.root, "org/m", C, "sub/m.safetensors", etag=E, size=10), want)
        self.assertIsNone(_cache.complete_file(self.root, "org/m", C, "sub/m.safetensors", etag="f" * 64))
        self.assertIsNone(_cache.complete_file(self.root, "org/m", C, "sub/m.safetensors", size=11))
        self.assertEqual(bytes(_cache.map_file(want)), b"0123456789")

    def test_anything_else_is_not_used(self):
        self.link("partial.safetensors", "../../../.hubproxy/partial/models--org--m--" + E)
        self.assertTrue(os.path.exists(os.path.join(self.repo, "snapshots", C, "partial.safetensors")))
        self.link("dangling.safetensors", "../../blobs/" + "0" * 64)
        self.link("elsewhere.safetensors", "../../.x")
        with open(os.path.join(self.repo, "snapshots", C, "plain.safetensors"), "wb") as f:
            f.write(b"x")
        for name in ("partial.safetensors", "dangling.safetensors", "elsewhere.safetensors", "plain.safetensors",
                     "missing.safetensors", "../../blobs/" + E):
            self.assertIsNone(_cache.complete_file(self.root, "org/m", C, name), name)
        self.assertIsNone(_cache.complete_file(self.root, "org/m", "main", "m.safetensors"))

    def test_refs(self):
        self.assertEqual(_cache.ref_commit(self.root, "org/m", "main"), C)
        self.assertEqual(_cache.ref_commit(self.root, "org/m", "refs/pr/1"), C)
        self.assertIsNone(_cache.ref_commit(self.root, "org/m", "dev"))
        self.assertIsNone(_cache.ref_commit(self.root, "org/other", "main"))


if __name__ == "__main__":
    unittest.main()
