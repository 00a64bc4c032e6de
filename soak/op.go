package soak

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// opKind is one kind of request the workload sends.
type opKind int

const (
	opWhole   opKind = iota // GET a whole file
	opRange                 // GET a Range of a file
	opHead                  // HEAD a file
	opMissing               // GET a file no commit has
	opTensor                // GET one tensor (or a Range of it)
	opShard                 // GET one tensor-parallel shard of a tensor
	opSubset                // GET a safetensors file of some tensors
	opListing               // GET the tensor listing
	opInfo                  // GET repo info
	opTree                  // GET the recursive tree
	numOps
)

func (k opKind) String() string {
	return [...]string{"whole", "range", "head", "missing", "tensor", "shard", "subset", "listing", "info", "tree"}[k]
}

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
		return p
	case opTree:
		return "/api/" + op.repo.Type().Plural() + "/" + op.repo.ID() + "/tree/" + rev + "?recursive=true"
	}
	panic("soak: unknown op")
}

func (op *op) method() string {
	if op.kind == opHead {
		return http.MethodHead
	}
	return http.MethodGet
}

func (op *op) ranged() bool { return op.kind == opRange || op.tRange }

// request builds the op's request to the proxy at base.
func (op *op) request(ctx context.Context, base string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, op.method(), base+op.target(), nil)
	if err != nil {
		return nil, err
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
