// Package cache is hubproxy's disk store: an HF_HUB_CACHE-compatible tree whose
// files fill lazily, block by block, from an upstream Origin.
//
// # Layout
//
// The root is itself a valid HF_HUB_CACHE; hubproxy keeps its own state under
// .hubproxy/, which huggingface_hub's scan_cache_dir reports as a (harmless)
// warning. layoutVersion is written to .hubproxy/version and checked on Open.
//
//	<dir>/
//	├── models--ns--name/                       hub.Repo.CacheDir()
//	│   ├── blobs/<etag>                         complete, verified content
//	│   ├── snapshots/<commit>/<path>            relative symlink → ../../blobs/<etag>
//	│   │                                        (one more "../" per directory in <path>)
//	│   └── refs/<rev>                           commit id, no newline (refs/pr/1 → refs/refs/pr/1)
//	└── .hubproxy/
//	    ├── version                              layoutVersion
//	    ├── partial/<repoDir>--<etag>            sparse data file being filled
//	    ├── partial/<repoDir>--<etag>.json       sidecar: repo, commit, path, etag, size,
//	    │                                        block size, present ranges
//	    ├── meta/<hex sha256(key)>               small documents (API JSON)
//	    └── tmp/                                 temp files, renamed into place
//
// Nothing is ever named *.incomplete or put under .locks: those belong to
// huggingface_hub. Items are keyed by (repo, etag), so two commits that share
// a file share its blob and its partial.
//
// # Filling
//
// Reads round out to Options.BlockSize. The blocks a read needs that are
// neither present nor claimed by a fill in flight are claimed, merged into as
// few upstream requests as possible, split at Options.ChunkSize and fetched in
// parallel (at most Options.MaxFills requests process-wide). A fill writes
// each block into the sparse file and only then marks it present, waking the
// readers that wait for it; readers always copy from the file, never from the
// upstream body.
//
// A fill of blocks a read needs runs on a context detached from the reader
// that caused it, so a client that hangs up never aborts a fill another
// reader waits for. Read-ahead (blocks planned beyond the read, inside the
// Expect window) belongs to its Handle: when the Handle is closed or its
// context ends, its read-ahead is cancelled, queued or streaming, unless
// another reader has come to wait for some of its blocks and so adopted it.
// A cancelled fill keeps the blocks it wrote and hands back the rest without
// counting a failure.
//
// # Eviction
//
// The least recently opened items nobody holds are evicted to keep the store
// within its budget. Under the store's lock an item is only detached and its
// file renamed into .hubproxy/tmp/; a janitor goroutine then deletes the file
// and removes the snapshot symlinks that dangle, walking each repo's
// snapshots/ once for all the blobs of a batch.
//
// # Promotion
//
// When every byte is present the file is hashed (sha256 for 64-hex etags, git
// blob sha1 for 40-hex ones). A match is fsynced and renamed into blobs/, and
// the snapshot symlinks are created; a mismatch deletes the partial and fails
// waiting readers with *VerifyError. A Handle that has read the whole file
// waits for that verdict before returning its last bytes, so a full download
// of a corrupt upstream file never completes successfully.
package cache

// layoutVersion is the version of the on-disk layout above. Bump it when the
// layout of .hubproxy/ or the sidecar format changes incompatibly.
const layoutVersion = 1
