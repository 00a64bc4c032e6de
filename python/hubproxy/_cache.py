"""Files read straight from hubproxy's cache directory, when it is mounted.

The cache is an HF_HUB_CACHE tree (internal/cache/doc.go):
models--org--name/blobs/<etag> holds complete content, verified against its
hash; snapshots/<commit>/<path> is a relative symlink to it, made only once
the blob is promoted whole; refs/<rev> holds a commit id. A file being filled
lives under .hubproxy/partial/ and never has a snapshot link, so a snapshot
link that resolves to a regular file directly in the repo's blobs/ is whole:
that, and only that, is used. (huggingface_hub's own cache follows the same
rule with *.incomplete files, so its tree works too.)

An evicted blob is renamed away and later unlinked; a mapping made before
keeps its bytes (the inode lives while mapped), so a mapping is never torn.
"""
import mmap
import os
import re

_COMMIT = re.compile(r"[0-9a-f]{40}")


def cache_dir_of(cache_dir):
    """cache_dir, else HUBPROXY_CACHE_DIR; None when neither names a directory."""
    d = cache_dir or os.environ.get("HUBPROXY_CACHE_DIR")
    return d if d and os.path.isdir(d) else None


def is_commit(rev):
    return bool(rev) and _COMMIT.fullmatch(rev) is not None


def repo_dir(cache_dir, repo):
    return os.path.join(cache_dir, "models--" + repo.replace("/", "--"))


def ref_commit(cache_dir, repo, revision):
    """The commit refs/<revision> names, or None."""
    try:
        with open(os.path.join(repo_dir(cache_dir, repo), "refs", *revision.split("/"))) as f:
            c = f.read().strip()
    except OSError:
        return None
    return c if is_commit(c) else None


def complete_file(cache_dir, repo, commit, filename, etag=None, size=None):
    """The path of filename's complete blob at commit, or None when the cache
    does not hold it whole (or it is not the blob etag/size name)."""
    if not is_commit(commit) or any(p in ("", ".", "..") for p in filename.split("/")):
        return None
    rd = repo_dir(cache_dir, repo)
    snap = os.path.join(rd, "snapshots", commit, *filename.split("/"))
    try:
        if not os.path.islink(snap):
            return None  # hubproxy only ever links; anything else is not its promotion
        target = os.path.realpath(snap)
        blobs = os.path.realpath(os.path.join(rd, "blobs"))
        if os.path.dirname(target) != blobs:
            return None
        st = os.stat(target)
    except OSError:
        return None
    import stat as _stat
    if not _stat.S_ISREG(st.st_mode):
        return None
    if etag and os.path.basename(target) != etag:
        return None
    if size is not None and st.st_size != size:
        return None
    return target


def map_file(path):
    """A private, copy-on-write mapping of path: writable, so torch may wrap
    it without a warning, while writes to the tensors never reach the cache.
    None when the file vanished (evicted) since it was found."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return bytearray()
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except FileNotFoundError:
        return None
