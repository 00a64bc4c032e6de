package soak

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// opKind is one kind of request the workload sends.
type opKind int

const (
	opWhole     opKind = iota // GET a whole file
	opRange                   // GET a Range of a file
	opHead                    // HEAD a file
	opMissing                 // GET a file no commit has
	opTensor                  // GET one tensor (or a Range of it)
	opShard                   // GET one tensor-parallel shard of a tensor
	opSubset                  // GET a safetensors file of some tensors
	opListing                 // GET the tensor listing
	opInfo                    // GET repo info (all of it, or the fields of expand)
	opTree                    // GET the recursive tree
	opPathsInfo               // POST paths-info for a few paths
	opBait                    // POST a pass-through path upstream answers 500: an attempt to open hubproxy's breaker
	numOps
)

func (k opKind) String() string {
	return [...]string{"whole", "range", "head", "missing", "tensor", "shard", "subset", "listing", "info", "tree",
		"paths-info", "bait"}[k]
}

// content reports whether an op of kind k reads file content (or what only
// the content holds: a tensor listing), which a gated repo keeps behind its
// gate, rather than repo metadata, which the Hub serves a gated repo's to
// anyone (docs/hub-protocol.md §9).
func (k opKind) content() bool { return k != opInfo && k != opTree && k != opPathsInfo && k != opBait }

// noSuchRev is a branch no repo has: an allowed caller gets RevisionNotFound
// for it, a refused one the refusal (the Hub checks the repo first).
const noSuchRev = "soak-no-such-branch"

// op is one request and what the oracle and the ledger need to know of it.
type op struct {
	kind   opKind
	caller string
	repo   hub.Repo
	rev    string // "main" or a commit id
	path   string // file ops
	// rng is a Range: [a, b]; b < 0 for "a-"; a < 0 for the suffix "-b".
	rng    [2]int64
	tensor string
	shard  [3]int // dim, rank, world
	tRange bool   // a Range of the tensor's bytes
	names  []string
	prefix string
	// expand is the repo-info fields asked for (none: all of them); paths,
	// the paths a paths-info request asks about.
	expand []string
	paths  []string
	// files are the repo files whose bytes the op may make the proxy fetch,
	// and sparse how many bytes it may fetch around the cache (column
	// shards): the byte ledger's terms for reads on a full disk, reads cut
	// by a kill, and sparse reads.
	files  []string
	sparse int64
	limit  int64 // the longest body a right answer can have, plus slack
}

// target is the op's URL path and query on a proxy.
func (op *op) target() string {
	rev := url.PathEscape(op.rev)
	switch op.kind {
	case opWhole, opRange, opHead, opMissing:
		return "/" + op.repo.String() + "/resolve/" + rev + "/" + escapePath(op.path)
	case opTensor, opShard:
		q := url.Values{"revision": {op.rev}}
		if op.kind == opShard {
			q.Set("shard", fmt.Sprintf("%d:%d/%d", op.shard[0], op.shard[1], op.shard[2]))
		}
		return "/models/" + op.repo.ID() + "/tensors/" + url.PathEscape(op.tensor) + "?" + q.Encode()
	case opSubset:
		q := url.Values{"revision": {op.rev}}
		for _, n := range op.names {
			q.Add("name", n)
		}
		if op.prefix != "" {
			q.Set("prefix", op.prefix)
		}
		return "/models/" + op.repo.ID() + "/safetensors?" + q.Encode()
	case opListing:
		return "/models/" + op.repo.ID() + "/tensors?revision=" + url.QueryEscape(op.rev)
	case opInfo:
		p := "/api/" + op.repo.Type().Plural() + "/" + op.repo.ID()
		if op.rev != "main" {
			p += "/revision/" + rev
		}
		if len(op.expand) > 0 {
			p += "?" + url.Values{"expand": op.expand}.Encode()
		}
		return p
	case opTree:
		return "/api/" + op.repo.Type().Plural() + "/" + op.repo.ID() + "/tree/" + rev + "?recursive=true"
	case opPathsInfo:
		return "/api/" + op.repo.Type().Plural() + "/" + op.repo.ID() + "/paths-info/" + rev
	case opBait:
		return "/api/" + op.repo.Type().Plural() + "/" + op.repo.ID() + baitMarker
	}
	panic("soak: unknown op")
}

func (op *op) method() string {
	switch op.kind {
	case opHead:
		return http.MethodHead
	case opPathsInfo, opBait:
		return http.MethodPost
	}
	return http.MethodGet
}

// body is a POST's form body: the paths asked about, as huggingface_hub
// sends them.
func (op *op) body() string {
	if op.kind != opPathsInfo {
		return ""
	}
	return url.Values{"paths": op.paths, "expand": {"False"}}.Encode()
}

func (op *op) ranged() bool { return op.kind == opRange || op.tRange }

// request builds the op's request to the proxy at base.
func (op *op) request(ctx context.Context, base string) (*http.Request, error) {
	var body io.Reader
	if b := op.body(); b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, op.method(), base+op.target(), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if op.caller != "" {
		req.Header.Set("Authorization", "Bearer "+op.caller)
	}
	if op.ranged() {
		req.Header.Set("Range", op.rangeHeader())
	}
	return req, nil
}

func (op *op) String() string {
	s := op.method() + " " + op.target()
	if op.ranged() {
		s += " Range: " + op.rangeHeader()
	}
	if op.kind == opPathsInfo {
		s += " paths " + strings.Join(op.paths, ",")
	}
	return s + " as " + callerName(op.caller)
}

// escapePath escapes each segment of a repo path, keeping the slashes.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
