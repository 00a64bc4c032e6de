package app_test

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The reference model of the Hub: which repos, files and commits exist, who
// may read what at each moment of the run, and so which answers the Hub
// could have given a caller in a window of time. It is written from the
// Hub's rules (docs/hub-protocol.md §9), not from hubproxy's code, and it
// computes every hash it checks itself.

// The repos of the model world. Their ids never change; their access does.
var modelRepoSpecs = []struct {
	typ            hub.RepoType
	id             string
	gated, private bool
	exists         bool
}{
	{hub.Model, "org/public", false, false, true},
	{hub.Model, "org/gated", true, false, true},
	{hub.Model, "org/private", false, true, true},
	{hub.Model, "org/flip", false, false, true},
	{hub.Dataset, "org/data", true, false, true},
	{hub.Model, "org/missing", false, false, false}, // never created: what a stranger must not tell a private repo from
}

const (
	repoPrivate = 2
	repoMissing = 5
)

// The callers. granted and revoked start approved for every repo; revoked is
// the one the run revokes and gives back; denied and unknown are valid
// tokens upstream never approved (the fake hub, like the Hub, tells them
// apart from anonymous callers but not from each other).
var modelCallers = []struct{ name, token string }{
	{"anon", ""},
	{"granted", "hf_granted"},
	{"denied", "hf_denied"},
	{"unknown", "hf_unknown_7f3a"},
	{"revoked", "hf_revoked"},
}

// Paths asked for, per repo type: the last of each is never in any commit.
var modelPaths = map[hub.RepoType][]string{
	hub.Model:   {"config.json", "model.safetensors", "weights.bin", "notes.txt", "missing.json"},
	hub.Dataset: {"data/train.csv", "data/big.bin", "notes.txt", "missing.csv"},
}

// Tensor names asked for: w3 is only in odd versions, none is in none.
var modelTensorNames = []string{"w1", "w2", "w3", "none"}

// marker is a string put in every file of every version, so any answer can
// be searched for content it must not carry: "MARK:<repo>:<version>:".
func marker(repo, version int) string { return fmt.Sprintf("MARK:%d:%d:", repo, version) }

type modelTensor struct {
	dtype string
	shape []int64
	data  []byte
}

type modelFile struct {
	data    []byte
	lfs     bool
	etag    string // what hubproxy must name it by: sha256 (LFS) or the git oid
	oid     string // git oid of what git stores (the pointer, for LFS)
	sha256  string
	tensors map[string]modelTensor // safetensors only
}

type modelCommit struct {
	id    string
	files map[string]*modelFile
}

// repoFiles is version v of repo r's files, each carrying r and v's marker.
func repoFiles(r int, typ hub.RepoType, v int) []hubtest.File {
	mk := marker(r, v)
	yes, no := true, false
	seed := uint64(r*1000 + v)
	big := append([]byte(mk), hubtest.RandomBytes(seed, 40<<10+v*1000)...)
	var files []hubtest.File
	if typ == hub.Dataset {
		files = []hubtest.File{
			{Path: "data/train.csv", Data: fmt.Appendf(nil, "a,b\n%d,%d\n%s\n", r, v, mk), LFS: &no},
			{Path: "data/big.bin", Data: big, LFS: &yes},
		}
	} else {
		tensors := []hubtest.Tensor{
			{Name: "w1", DType: "F32", Shape: []int64{16, 8}, Data: hubtest.RandomBytes(seed+1, 512)},
			{Name: "w2", DType: "F16", Shape: []int64{64}, Data: hubtest.RandomBytes(seed+2, 128)},
		}
		if v%2 == 1 {
			tensors = append(tensors, hubtest.Tensor{Name: "w3", DType: "BF16", Shape: []int64{32}, Data: hubtest.RandomBytes(seed+3, 64)})
		}
		files = []hubtest.File{
			{Path: "config.json", Data: fmt.Appendf(nil, `{"model_type":"llama","v":%d,"marker":%q}`, v, mk), LFS: &no},
			{Path: "model.safetensors", Data: hubtest.Safetensors(tensors, map[string]string{"marker": mk}), LFS: &yes},
			{Path: "weights.bin", Data: big, LFS: &yes},
		}
	}
	if v%2 == 0 {
		files = append(files, hubtest.File{Path: "notes.txt", Data: []byte("notes " + mk + "\n"), LFS: &no})
	}
	return files
}

// newModelCommit describes a commit the fake hub made of files.
func newModelCommit(id string, files []hubtest.File) *modelCommit {
	c := &modelCommit{id: id, files: map[string]*modelFile{}}
	for _, f := range files {
		mf := &modelFile{data: f.Data, lfs: f.LFS != nil && *f.LFS}
		if mf.lfs {
			s := sha256.Sum256(f.Data)
			mf.sha256 = hex.EncodeToString(s[:])
			mf.etag, mf.oid = mf.sha256, gitOID(lfsPointerText(mf.sha256, len(f.Data)))
		} else {
			mf.oid = gitOID(f.Data)
			mf.etag = mf.oid
		}
		if strings.HasSuffix(f.Path, ".safetensors") {
			mf.tensors = parseSafetensors(f.Data)
		}
		c.files[f.Path] = mf
	}
	return c
}

func gitOID(p []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(p))
	h.Write(p)
	return hex.EncodeToString(h.Sum(nil))
}

// lfsPointerText is git-lfs's pointer format (git-lfs spec v1).
func lfsPointerText(sha string, size int) []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha, size)
}

// listing is what a tree listing of dir at c holds (direct children):
// path → size, -1 for a directory; ok is false when dir names nothing.
func (c *modelCommit) listing(dir string) (map[string]int64, bool) {
	out := map[string]int64{}
	found := dir == ""
	for p, f := range c.files {
		if p == dir {
			return map[string]int64{p: int64(len(f.data))}, true
		}
		rest, under := strings.CutPrefix(p, dir+"/")
		if dir == "" {
			rest, under = p, true
		}
		if !under {
			continue
		}
		found = true
		if head, _, deeper := strings.Cut(rest, "/"); deeper {
			out[path.Join(dir, head)] = -1
		} else {
			out[p] = int64(len(f.data))
		}
	}
	return out, found
}

// hubState is who may read what at one moment, and how many commits each
// repo had then (commits are only ever added, and stay readable by id).
type hubState struct {
	gated, private []bool
	approved       []map[string]bool
	revoked        map[string]bool
	commits        []int
}

func (s *hubState) clone() *hubState {
	c := &hubState{gated: append([]bool(nil), s.gated...), private: append([]bool(nil), s.private...),
		revoked: maps.Clone(s.revoked), commits: append([]int(nil), s.commits...)}
	for _, a := range s.approved {
		c.approved = append(c.approved, maps.Clone(a))
	}
	return c
}

func (s *hubState) approvedFor(r int, tok string) bool {
	return tok != "" && !s.revoked[tok] && s.approved[r][tok]
}

// refusal is the Hub's answer to tok for repo r on a content route (file
// bytes: resolve, raw, and so the tensor routes) or a metadata route (repo
// info, tree, paths-info): 0 and "" when it lets the caller through.
// A gated repo's metadata is public; a private repo is RepoNotFound to
// strangers everywhere (401 anonymous, 404 with a token), like a repo that
// does not exist; a gated repo's content is GatedRepo (401 anonymous, 403
// with a token).
func (s *hubState) refusal(r int, tok string, content bool) (int, string) {
	status := http.StatusNotFound
	if tok == "" {
		status = http.StatusUnauthorized
	}
	switch {
	case !modelRepoSpecs[r].exists, s.private[r] && !s.approvedFor(r, tok):
		return status, hubtest.CodeRepoNotFound
	case content && s.gated[r] && !s.approvedFor(r, tok):
		if tok != "" {
			status = http.StatusForbidden
		}
		return status, hubtest.CodeGatedRepo
	}
	return 0, ""
}

// snapshot is the hub's state from at until the next snapshot's at.
type snapshot struct {
	at time.Time
	st *hubState
}

// modelRef is the reference model: the repos' commits and the history of
// the hub's state.
type modelRef struct {
	commits [][]*modelCommit // per repo, in order; version = index
	hist    []snapshot
}

func (m *modelRef) now() *hubState { return m.hist[len(m.hist)-1].st }

// change records a new state from at on, made by edit on a copy.
func (m *modelRef) change(at time.Time, edit func(*hubState)) {
	st := m.now().clone()
	edit(st)
	m.hist = append(m.hist, snapshot{at: at, st: st})
}

// window is every state the hub was in at some moment of [t-w, t].
func (m *modelRef) window(t time.Time, w time.Duration) []*hubState {
	var out []*hubState
	for i, s := range m.hist {
		if s.at.After(t) {
			break
		}
		if i+1 < len(m.hist) && m.hist[i+1].at.Before(t.Add(-w)) {
			continue
		}
		out = append(out, s.st)
	}
	return out
}

// revCommits is which commits rev may name in state st: every commit main
// has pointed to by then (the proxy may lag a push, which is not an access
// matter), the one commit a commit id names, none for a revision that never
// existed.
func (m *modelRef) revCommits(st *hubState, r int, rev modelRev) []*modelCommit {
	n := st.commits[r]
	switch rev.kind {
	case revMain:
		return m.commits[r][:n]
	case revCommit:
		if rev.commit < n {
			return m.commits[r][rev.commit : rev.commit+1]
		}
	}
	return nil
}

// sortedKeys lists a map's keys in order, for stable messages.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
