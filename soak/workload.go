package soak

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
)

// opWeights is the workload's mix, in parts of 100.
func opWeight(k opKind) int {
	return [...]int{opWhole: 18, opRange: 20, opHead: 6, opMissing: 3, opTensor: 10, opShard: 10,
		opSubset: 6, opListing: 5, opInfo: 10, opTree: 8, opPathsInfo: 3, opBait: 1}[k]
}

// generator draws ops from the world as it is now.
type generator struct {
	w    *world
	hist *history
	// calm stops the attacker's breaker bait once the chaos is over: the
	// quiet phase checks the breaker on its own (final.go), so that an
	// open breaker is reported as what it is.
	calm atomic.Bool
}

// next draws one op with rng.
func (g *generator) next(rng *rand.Rand) *op {
	kind := pickKind(rng)
	for kind == opBait && g.calm.Load() {
		kind = pickKind(rng)
	}
	repos := g.w.repos
	fix := repos[rng.IntN(len(repos))]
	if kind >= opTensor && kind <= opListing {
		for !fix.tensors {
			fix = repos[rng.IntN(len(repos))]
		}
	}
	o := &op{kind: kind, repo: fix.repo, caller: pickCaller(rng), rev: "main"}
	commit := g.hist.current().heads[fix.repo]
	if rng.IntN(100) < 15 {
		ids := g.w.commitsOf(fix.repo)
		commit = ids[rng.IntN(len(ids))]
		o.rev = commit
	}
	c := g.w.commit(commit)
	switch kind {
	case opWhole, opHead:
		g.fileOp(rng, o, c)
		if rng.IntN(100) < 4 {
			o.rev = noSuchRev // the repo's checks come first: see oracle.check
		}
	case opRange:
		g.fileOp(rng, o, c)
	case opMissing:
		o.path = "missing/" + randName(rng) + ".bin"
		o.limit = 64 << 10
	case opTensor, opShard:
		g.tensorOp(rng, o, c)
	case opSubset:
		g.subsetOp(rng, o, c)
	case opListing:
		o.files = stFiles(c)
		o.limit = 1 << 20
	case opInfo:
		infoOp(rng, o)
	case opPathsInfo:
		pathsOp(rng, o, c)
	default:
		o.limit = 1 << 20
	}
	return o
}

// infoOp fills in a repo info request: now and then a projection
// (expand=private, expand=gated, both), or a branch the repo does not have.
func infoOp(rng *rand.Rand, o *op) {
	o.limit = 1 << 20
	switch n := rng.IntN(100); {
	case n < 10:
		o.expand = []string{"private"}
	case n < 20:
		o.expand = []string{"gated"}
	case n < 25:
		o.expand = []string{"private", "gated"}
	case n < 30:
		o.rev = noSuchRev
	}
}

// pathsOp fills in a paths-info request: one to three of c's paths, and
// now and then one no commit has.
func pathsOp(rng *rand.Rand, o *op, c *commitFix) {
	o.limit = 1 << 20
	for range 1 + rng.IntN(3) {
		if p := c.paths[rng.IntN(len(c.paths))]; !slices.Contains(o.paths, p) {
			o.paths = append(o.paths, p)
		}
	}
	if rng.IntN(4) == 0 {
		o.paths = append(o.paths, "missing/"+randName(rng)+".bin")
	}
}

func pickKind(rng *rand.Rand) opKind {
	n := rng.IntN(100)
	for k := range numOps {
		if n -= opWeight(k); n < 0 {
			return k
		}
	}
	return opWhole
}

// pickCaller draws who sends the op: anonymous, granted (alice), revoked
// now and then (bob) or never approved (carol).
func pickCaller(rng *rand.Rand) string {
	switch n := rng.IntN(100); {
	case n < 25:
		return anon
	case n < 55:
		return tokAlice
	case n < 80:
		return tokBob
	}
	return tokCarol
}

func randName(rng *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

// fileOp fills in a whole, ranged or HEAD request for a file of c.
func (g *generator) fileOp(rng *rand.Rand, o *op, c *commitFix) {
	o.path = c.paths[rng.IntN(len(c.paths))]
	f := c.files[o.path]
	if o.kind == opRange && f.key == g.w.corruptKey {
		o.kind = opWhole // see world.corruptKey
	}
	o.files = []string{o.path}
	o.limit = g.w.maxSize + 1<<20
	if o.kind == opRange {
		o.rng = drawRange(rng, f.size())
	}
}

// drawRange draws a Range for a file of size bytes: mostly a few bytes to a
// few chunks anywhere, sometimes open-ended or a suffix, sometimes across a
// 64 KiB block boundary.
func drawRange(rng *rand.Rand, size int64) [2]int64 {
	length := int64(1) << rng.IntN(19) // 1 B to 256 KiB
	length += rng.Int64N(length)
	switch n := rng.IntN(100); {
	case n < 12:
		return [2]int64{rng.Int64N(size), -1}
	case n < 22:
		return [2]int64{-1, length}
	case n < 40 && size > 64<<10:
		start := (rng.Int64N(size/(64<<10))+1)*(64<<10) - rng.Int64N(4096) - 1
		return [2]int64{start, start + length}
	}
	start := rng.Int64N(size)
	return [2]int64{start, start + length - 1}
}

// tensorOp fills in a tensor or shard request for a tensor of c.
func (g *generator) tensorOp(rng *rand.Rand, o *op, c *commitFix) {
	o.tensor = c.names[rng.IntN(len(c.names))]
	t := c.tensors[o.tensor]
	o.files = append([]string{t.file}, indexOf(c)...)
	o.limit = t.n + 1<<20
	if o.kind == opShard {
		dim := rng.IntN(len(t.shape))
		world := []int{2, 3, 4, 8}[rng.IntN(4)]
		o.shard = [3]int{dim, rng.IntN(world), world}
		if dim > 0 {
			// A column shard is a short piece of every row: hubproxy reads
			// those around the cache, so they may come from upstream every
			// time. Every byte it fetches lies within the tensor.
			o.sparse = t.n
		}
		return
	}
	if rng.IntN(100) < 25 {
		o.tRange = true
		o.rng = drawRange(rng, t.n)
	}
}

// subsetOp fills in a subset request: a few names, or a prefix.
func (g *generator) subsetOp(rng *rand.Rand, o *op, c *commitFix) {
	name := c.names[rng.IntN(len(c.names))]
	if rng.IntN(2) == 0 {
		o.names = []string{name}
		for range rng.IntN(3) {
			o.names = append(o.names, c.names[rng.IntN(len(c.names))])
		}
	} else {
		parts := strings.SplitN(name, ".", 3)
		o.prefix = parts[0] + "."
		if len(parts) == 3 {
			o.prefix += parts[1] + "."
		}
	}
	var n int64
	files := map[string]bool{}
	for _, t := range subsetNames(o, c) {
		n += c.tensors[t].n
		files[c.tensors[t].file] = true
	}
	for f := range files {
		o.files = append(o.files, f)
	}
	o.files = append(o.files, indexOf(c)...)
	o.limit = n + 1<<20
}

// stFiles is every safetensors file of c, and its index.
func stFiles(c *commitFix) []string {
	var out []string
	for _, p := range c.paths {
		if strings.HasSuffix(p, ".safetensors") || strings.HasSuffix(p, ".safetensors.index.json") {
			out = append(out, p)
		}
	}
	return out
}

// indexOf is c's sharded-checkpoint index, if it has one: the tensor API
// reads it first.
func indexOf(c *commitFix) []string {
	for _, p := range c.paths {
		if strings.HasSuffix(p, ".safetensors.index.json") {
			return []string{p}
		}
	}
	return nil
}
