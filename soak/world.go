package soak

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The callers. Tokens are the hub's: it approves them per repo.
const (
	anon     = ""
	tokAlice = "hf_soak_alice" // approved on every restricted repo
	tokBob   = "hf_soak_bob"   // approved on the gated repos; revoked and re-granted by the chaos
	tokCarol = "hf_soak_carol" // authenticates, approved nowhere
	// tokProxy is hubproxy's own --upstream-token, approved everywhere: it
	// must never open a restricted repo to a caller the hub refuses.
	tokProxy = "hf_soak_proxy"
)

// callerName names a caller in reports, never by its token.
func callerName(tok string) string {
	switch tok {
	case anon:
		return "anonymous"
	case tokAlice:
		return "alice"
	case tokBob:
		return "bob"
	case tokCarol:
		return "carol"
	}
	return "other"
}

// blobFix is one file content the hub serves, named as hubproxy names it.
type blobFix struct {
	etag string // sha256 (LFS) or git blob sha1 (regular)
	key  string // "{repo}/{path}" where it first appeared, as hubtest keys its counters
	repo hub.Repo
	data []byte
	sum  [32]byte
	lfs  bool
}

func (b *blobFix) size() int64 { return int64(len(b.data)) }

// tensorFix is one tensor of a commit, located in its file.
type tensorFix struct {
	name, dtype string
	shape       []int64
	file        string
	off, n      int64 // absolute offset in the file, and length
}

// commitFix is what one commit holds.
type commitFix struct {
	id      string
	repo    hub.Repo
	files   map[string]*blobFix
	paths   []string // sorted
	tensors map[string]*tensorFix
	names   []string // tensor names, sorted
	// headerEnd is, per safetensors file, where its header ends: the
	// bytes the tensor API reads before any tensor's.
	headerEnd map[string]int64
}

func (c *commitFix) tensorBytes(t *tensorFix) []byte {
	return c.files[t.file].data[t.off : t.off+t.n]
}

// repoFix is one repository and its part in the soak.
type repoFix struct {
	repo           hub.Repo
	gated, private bool // at the start
	approved       []string
	flips          bool // the chaos changes its access
	moving         bool // the chaos commits to its main branch
	tensors        bool // holds safetensors the tensor API can read
	// phase: only a phase of its own reads it (phases.go), so that its
	// files are cold when that phase begins and its bytes are that
	// phase's alone: the workload, the attacker, the sweep and the cold
	// node leave it alone.
	phase bool
}

// world is the fixture: every repo, commit and blob the hub has served, so
// the oracle can name the right bytes for any answer.
type world struct {
	mu      sync.RWMutex
	repos   []*repoFix // the workload's
	phased  []*repoFix // the phases' own (repoFix.phase)
	byRepo  map[hub.Repo]*repoFix
	commits map[string]*commitFix
	first   map[hub.Repo]string   // each repo's first commit
	order   map[hub.Repo][]string // each repo's commits, oldest first
	blobs   map[string]*blobFix   // by etag
	keys    map[string][]*blobFix
	maxSize int64
	// corruptKey is the one file the CorruptBytes fault hits; the workload
	// reads it whole only, since a range of a file that has not yet
	// completed cannot be verified (its hash covers the whole file).
	corruptKey string
	seed       uint64
	gen        int // commits made to the moving repo
}

func lfsFile(p string, data []byte) hubtest.File {
	return hubtest.File{Path: p, Data: data, LFS: new(true)}
}
func regFile(p string, data []byte) hubtest.File {
	return hubtest.File{Path: p, Data: data, LFS: new(false)}
}

// newWorld creates the repos on every hub, which must agree on every
// commit id (their histories are the same). bigSize is the size of the
// small-disk phase's file (bigSize for a run; tests make it small).
func newWorld(hubs []*hubtest.Hub, seed uint64, bigSize int) (*world, error) {
	h := hubs[0]
	w := &world{
		byRepo: map[hub.Repo]*repoFix{}, commits: map[string]*commitFix{}, first: map[hub.Repo]string{}, order: map[hub.Repo][]string{},
		blobs: map[string]*blobFix{}, keys: map[string][]*blobFix{}, seed: seed,
	}
	rnd := func(i uint64, n int) []byte { return hubtest.RandomBytes(seed*1000+i, n) }
	cfg := func(name string) []byte {
		return fmt.Appendf(nil, "{\n  \"model_type\": \"soak\",\n  \"name\": %q,\n  \"seed\": %d\n}\n", name, seed)
	}
	restricted := []string{tokAlice, tokProxy}
	llm := append(hubtest.ShardedModel("model", 3, 4, 128, 1024),
		regFile("config.json", cfg("llm")),
		regFile("tokenizer.json", rnd(1, 200<<10)),
		lfsFile("blob.bin", rnd(2, 768<<10)))
	specs := []struct {
		fix   repoFix
		files []hubtest.File
	}{
		{repoFix{repo: hub.MustRepo(hub.Model, "soak/llm"), tensors: true}, llm},
		{repoFix{repo: hub.MustRepo(hub.Model, "soak/gated"), gated: true, approved: append(restricted, tokBob), tensors: true},
			[]hubtest.File{lfsFile("model.safetensors", mixedSafetensors(seed, "gated", 256)), regFile("config.json", cfg("gated"))}},
		{repoFix{repo: hub.MustRepo(hub.Model, "soak/private"), private: true, approved: restricted, tensors: true},
			[]hubtest.File{lfsFile("model.safetensors", mixedSafetensors(seed, "private", 128)), regFile("README.md", rnd(3, 3<<10))}},
		{repoFix{repo: hub.MustRepo(hub.Model, "soak/flip"), approved: restricted, flips: true, tensors: true},
			[]hubtest.File{lfsFile("model.safetensors", mixedSafetensors(seed, "flip", 128)), regFile("config.json", cfg("flip"))}},
		{repoFix{repo: hub.MustRepo(hub.Model, "soak/moving"), moving: true, tensors: true}, w.movingFiles(0)},
		{repoFix{repo: hub.MustRepo(hub.Dataset, "soak/corpus"), gated: true, approved: append(restricted, tokBob)},
			[]hubtest.File{lfsFile("train.bin", rnd(4, 1536<<10)), regFile("README.md", rnd(5, 2<<10))}},
		// The phases' (phases.go): a file of a few chunks for the slow
		// owner, and one far larger than the small-disk node's disk.
		{repoFix{repo: hub.MustRepo(hub.Model, slowRepo), phase: true}, []hubtest.File{lfsFile(slowFile, rnd(6, slowSize))}},
		{repoFix{repo: hub.MustRepo(hub.Model, bigRepo), phase: true}, []hubtest.File{lfsFile(bigFile, rnd(7, bigSize))}},
	}
	for _, s := range specs {
		fix := s.fix
		spec := hubtest.RepoSpec{Type: fix.repo.Type(), ID: fix.repo.ID(), Files: s.files,
			Gated: fix.gated, Private: fix.private, ApprovedTokens: fix.approved}
		id := h.AddRepo(spec)
		for _, other := range hubs[1:] {
			if got := other.AddRepo(spec); got != id {
				return nil, fmt.Errorf("soak: hubs disagree on %s's first commit: %s and %s", fix.repo, id, got)
			}
		}
		w.byRepo[fix.repo] = &fix
		if err := w.addCommit(h, fix.repo, id, s.files); err != nil {
			return nil, err
		}
		if fix.phase {
			w.phased = append(w.phased, &fix)
		} else {
			w.repos = append(w.repos, &fix)
		}
		w.first[fix.repo] = id
	}
	w.corruptKey = "soak/llm/blob.bin"
	return w, nil
}

// allRepos is every repo, the phases' included.
func (w *world) allRepos() []*repoFix {
	return append(append([]*repoFix(nil), w.repos...), w.phased...)
}

// nextMovingFiles is the file set of the moving repo's next commit.
func (w *world) nextMovingFiles() []hubtest.File {
	w.mu.Lock()
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	return w.movingFiles(gen)
}

// mixedSafetensors is a single-file model with tensors of several dtypes;
// rows scales it.
func mixedSafetensors(seed uint64, name string, rows int64) []byte {
	return hubtest.Safetensors([]hubtest.Tensor{
		{Name: "embed.weight", DType: "F32", Shape: []int64{rows, 512}},
		{Name: "layers.0.attn.weight", DType: "BF16", Shape: []int64{rows, 1024}},
		{Name: "layers.0.mlp.weight", DType: "F16", Shape: []int64{rows * 2, 512}},
		{Name: "layers.1.attn.weight", DType: "BF16", Shape: []int64{rows, 1024}},
		{Name: "norm.weight", DType: "F32", Shape: []int64{1024}},
		{Name: "head.weight", DType: "I8", Shape: []int64{rows, 1024}},
	}, map[string]string{"format": "pt", "soak": name, "seed": fmt.Sprint(seed)})
}

// movingFiles is the file set of the moving repo's gen-th commit: data.bin
// and notes.txt change every time, model.safetensors never (so its blob is
// shared by every commit), extra.txt comes and goes.
func (w *world) movingFiles(gen int) []hubtest.File {
	base := w.seed*1000 + 100
	files := []hubtest.File{
		lfsFile("data.bin", hubtest.RandomBytes(base+uint64(gen)*2, 512<<10)),
		regFile("notes.txt", fmt.Appendf(nil, "generation %d of seed %d\n%x\n", gen, w.seed, hubtest.RandomBytes(base+uint64(gen)*2+1, 4<<10))),
		lfsFile("model.safetensors", w.movingModel()),
	}
	if gen%2 == 1 {
		files = append(files, regFile("extra.txt", fmt.Appendf(nil, "extra of generation %d\n", gen)))
	}
	return files
}

// movingModel is the moving repo's unchanging weights, built once.
func (w *world) movingModel() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.blobsByKey("soak/moving/model.safetensors"); b != nil {
		return b.data
	}
	return mixedSafetensors(w.seed, "moving", 64)
}

func (w *world) blobsByKey(key string) *blobFix {
	if bs := w.keys[key]; len(bs) > 0 {
		return bs[0]
	}
	return nil
}

// addCommit records commit id of repo, holding files, and checks that the
// hub names every file as the world does.
func (w *world) addCommit(h *hubtest.Hub, repo hub.Repo, id string, files []hubtest.File) error {
	c := &commitFix{id: id, repo: repo, files: map[string]*blobFix{}, tensors: map[string]*tensorFix{}, headerEnd: map[string]int64{}}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range files {
		// Whether git keeps it in LFS is the hub's call (File.LFS or its
		// default rule); the name follows from that, computed here.
		st, ok := h.Stat(repo, id, f.Path)
		b := &blobFix{key: repo.String() + "/" + f.Path, repo: repo, data: f.Data, sum: sha256.Sum256(f.Data), lfs: st.LFS}
		b.etag = hub.GitBlobSHA1(f.Data)
		if b.lfs {
			b.etag = hex.EncodeToString(b.sum[:])
		}
		if !ok || st.ETag != b.etag || st.Size != b.size() {
			return fmt.Errorf("soak: the hub names %s@%s:%s %+v, the fixture %s", repo, id, f.Path, st, b.etag)
		}
		if old := w.blobs[b.etag]; old != nil {
			b = old // the same content again: one blob
		} else {
			w.blobs[b.etag] = b
			w.keys[b.key] = append(w.keys[b.key], b)
			if fix := w.byRepo[repo]; fix == nil || !fix.phase {
				w.maxSize = max(w.maxSize, b.size()) // the workload's largest answer
			}
		}
		c.files[f.Path] = b
		c.paths = append(c.paths, f.Path)
		if strings.HasSuffix(f.Path, ".safetensors") {
			st, err := parseSafetensors(f.Data, true)
			if err != nil {
				return fmt.Errorf("soak: fixture %s: %w", f.Path, err)
			}
			c.headerEnd[f.Path] = st.DataStart
			for _, t := range st.Tensors {
				c.tensors[t.Name] = &tensorFix{name: t.Name, dtype: t.DType, shape: t.Shape, file: f.Path,
					off: st.DataStart + t.Begin, n: t.End - t.Begin}
				c.names = append(c.names, t.Name)
			}
		}
	}
	sort.Strings(c.paths)
	sort.Strings(c.names)
	w.commits[id] = c
	w.order[repo] = append(w.order[repo], id)
	return nil
}

// commit returns a recorded commit, or nil.
func (w *world) commit(id string) *commitFix {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.commits[id]
}

// commitsOf lists repo's commits, oldest first.
func (w *world) commitsOf(repo hub.Repo) []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return append([]string(nil), w.order[repo]...)
}

// blob returns the blob named etag, or nil.
func (w *world) blob(etag string) *blobFix {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.blobs[etag]
}

// allBlobs lists every blob, sorted by key then etag.
func (w *world) allBlobs() []*blobFix {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]*blobFix, 0, len(w.blobs))
	for _, b := range w.blobs {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key != out[j].key {
			return out[i].key < out[j].key
		}
		return out[i].etag < out[j].etag
	})
	return out
}

// keySize is the largest content a file key has had.
func (w *world) keySize(key string) int64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var n int64
	for _, b := range w.keys[key] {
		n = max(n, b.size())
	}
	return n
}
