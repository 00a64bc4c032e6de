package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// File is one file in a commit.
type File struct {
	Path string // relative, '/'-separated; must pass hub.ValidPath
	Data []byte // held by reference: do not modify after handing it in
	// LFS says whether git stores the file as an LFS pointer. nil chooses as
	// the Hub's .gitattributes usually do: LFS when the file is at least
	// 1 MiB or has a weights suffix (.safetensors, .bin, .gguf, .pt, .h5,
	// .onnx, .msgpack).
	LFS *bool
}

// lfsThreshold is the size from which files are stored in LFS by default.
const lfsThreshold = 1 << 20

var lfsSuffixes = []string{".safetensors", ".bin", ".gguf", ".pt", ".h5", ".onnx", ".msgpack"}

func (f File) isLFS() bool {
	if f.LFS != nil {
		return *f.LFS
	}
	if len(f.Data) >= lfsThreshold {
		return true
	}
	name := strings.ToLower(f.Path)
	for _, s := range lfsSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// blob is one file's content and every identifier the Hub derives from it.
// It is immutable once built.
type blob struct {
	data    []byte
	lfs     bool
	oid     string // git blob sha1 of what git stores: the content, or the LFS pointer
	sha256  string // LFS only: sha256 of the content (lfs.oid, the CDN object key)
	pointer []byte // LFS only: the pointer text git stores
	xetHash string // LFS only: a stand-in for the Xet file hash (64 hex)
	cdnETag string // LFS only: the CDN's own ETag, deliberately not the sha256
}

func newBlob(f File) *blob {
	b := &blob{data: f.Data, lfs: f.isLFS()}
	if !b.lfs {
		b.oid = gitBlobSHA1(f.Data)
		return b
	}
	sum := sha256.Sum256(f.Data)
	b.sha256 = hex.EncodeToString(sum[:])
	b.pointer = lfsPointer(b.sha256, len(f.Data))
	b.oid = gitBlobSHA1(b.pointer)
	b.xetHash = derivedHex("xet", b.sha256)
	b.cdnETag = derivedHex("cdn", b.sha256)
	return b
}

// size is the real file size (never the pointer's).
func (b *blob) size() int64 { return int64(len(b.data)) }

// etag is what clients name the blob by: the sha256 for LFS files, the git
// oid otherwise (docs/hub-protocol.md §1a).
func (b *blob) etag() string {
	if b.lfs {
		return b.sha256
	}
	return b.oid
}

// gitBlobSHA1 is git's object id for a blob: sha1("blob <size>\x00" + content).
func gitBlobSHA1(p []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(p))
	h.Write(p)
	return hex.EncodeToString(h.Sum(nil))
}

// lfsPointer is the text git-lfs stores in place of the content.
func lfsPointer(sha string, size int) []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha, size)
}

// derivedHex makes a stable 64-hex value from a label and a value, for
// identifiers that must differ from the sha256 but be deterministic.
func derivedHex(label, v string) string {
	sum := sha256.Sum256([]byte(label + "\x00" + v))
	return hex.EncodeToString(sum[:])
}

// treeEntry is one file or directory of a commit's tree.
type treeEntry struct {
	path string
	dir  bool
	oid  string
	blob *blob // files only
}

// commitObj is one immutable commit: its file set and the tree derived from it.
type commitObj struct {
	repo    hub.Repo
	id      string
	date    time.Time
	files   map[string]*blob
	entries []treeEntry    // every file and directory, sorted by path
	index   map[string]int // path → position in entries
}

// newCommit derives a commit from its file set. The id hashes the repo, the
// branch, the parent and every (path, oid), so the same history always gets
// the same ids.
func newCommit(repo hub.Repo, branch, parent string, date time.Time, files map[string]*blob) *commitObj {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	id := sha1.New()
	fmt.Fprintf(id, "commit\n%s\n%s\n%s\n", repo, branch, parent)
	dirs := map[string]hash.Hash{}
	for _, p := range paths {
		oid := files[p].oid
		fmt.Fprintf(id, "%s\x00%s\n", p, oid)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dh := dirs[d]
			if dh == nil {
				dh = sha1.New()
				dh.Write([]byte("tree\n"))
				dirs[d] = dh
			}
			fmt.Fprintf(dh, "%s\x00%s\n", strings.TrimPrefix(p, d+"/"), oid)
		}
	}

	c := &commitObj{
		repo:  repo,
		id:    hex.EncodeToString(id.Sum(nil)),
		date:  date,
		files: files,
		index: make(map[string]int, len(files)+len(dirs)),
	}
	for _, p := range paths {
		c.entries = append(c.entries, treeEntry{path: p, oid: files[p].oid, blob: files[p]})
	}
	for d, dh := range dirs {
		c.entries = append(c.entries, treeEntry{path: d, dir: true, oid: hex.EncodeToString(dh.Sum(nil))})
	}
	sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].path < c.entries[j].path })
	for i, e := range c.entries {
		c.index[e.path] = i
	}
	return c
}

// list returns the entries under dir ("" is the root): its direct children,
// or every descendant when recursive. ok is false when dir names nothing;
// a file path lists as that single file.
func (c *commitObj) list(dir string, recursive bool) (out []treeEntry, ok bool) {
	if dir != "" {
		i, found := c.index[dir]
		if !found {
			return nil, false
		}
		if !c.entries[i].dir {
			return []treeEntry{c.entries[i]}, true
		}
	}
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	for _, e := range c.entries {
		rest, under := strings.CutPrefix(e.path, prefix)
		if !under || (!recursive && strings.Contains(rest, "/")) {
			continue
		}
		out = append(out, e)
	}
	return out, true
}
