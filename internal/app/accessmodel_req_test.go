package app_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

type routeKind int

const (
	routeResolve routeKind = iota
	routeRaw
	routeInfo // repo info, with or without a revision or expand=
	routeTree
	routePathsInfo
	routeTensor
	routeTensorList
	routeSubset
	routePass
)

// content reports whether the route serves file content, which a gated
// repo's gate covers; the others are metadata, which it does not.
func (k routeKind) content() bool {
	return k == routeResolve || k == routeRaw || k == routeTensor || k == routeTensorList || k == routeSubset
}

// The listeners a request goes to.
const (
	nodeA     = iota // hubproxy's hub API
	nodeAdmin        // its admin API
	nodeB            // the second node, sharing the store with the first
)

// modelReq is one concrete request: what was sent, and what the model needs
// to judge the answer.
type modelReq struct {
	node   int
	tok    string
	caller int
	repo   int
	route  routeKind
	method string
	url    string
	header http.Header
	body   []byte
	rev    modelRev // revCommit's commit is the concrete index
	path   string   // the file, or the tree's directory
	paths  []string // paths-info
	rng    [2]int64 // inclusive [start, end] when hasRng
	hasRng bool
	inm    string // the etag sent in If-None-Match
	names  []string
	t      time.Time
}

func (r *modelReq) String() string {
	s := fmt.Sprintf("%s %s as %s", r.method, r.url, modelCallers[r.caller].name)
	for _, k := range []string{"Range", "If-None-Match"} {
		if v := r.header.Get(k); v != "" {
			s += fmt.Sprintf(" %s: %s", k, v)
		}
	}
	if r.body != nil {
		s += fmt.Sprintf(" body %q", r.body)
	}
	return s
}

// revString names rev in a URL, and fixes a commit index to one that exists.
func (w *modelWorld) revString(r int, rev *modelRev) string {
	commits := w.ref.commits[r]
	switch rev.kind {
	case revCommit:
		if len(commits) == 0 {
			return strings.Repeat("0123456789", 4) // a commit of a repo that does not exist
		}
		rev.commit %= len(commits)
		return commits[rev.commit].id
	case revMissing:
		return "no-such-rev"
	}
	return "main"
}

// request builds op's request (for repo r, which a pair probe varies).
func (w *modelWorld) request(op modelOp, r int) *modelReq {
	spec := modelRepoSpecs[r]
	req := &modelReq{tok: modelCallers[op.caller].token, caller: op.caller, repo: r, method: op.method,
		header: http.Header{}, rev: op.rev, t: w.clock.Now()}
	rev := w.revString(r, &req.rev)
	repo := w.repos[r]
	api := "/api/" + spec.typ.Plural() + "/" + spec.id
	switch op.kind {
	case opFile, opStoreRead:
		if op.kind == opStoreRead {
			req.node = nodeB
		}
		req.route, req.path = routeResolve, modelPaths[spec.typ][op.path]
		kind := "/resolve/"
		if op.raw {
			req.route, kind = routeRaw, "/raw/"
		}
		req.url = "/" + repo.String() + kind + rev + "/" + req.path
		if op.rng[1] > 0 && op.method == http.MethodGet {
			req.rng, req.hasRng = [2]int64{op.rng[0], op.rng[0] + op.rng[1] - 1}, true
			req.header.Set("Range", fmt.Sprintf("bytes=%d-%d", req.rng[0], req.rng[1]))
		}
		if cs := w.ref.commits[r]; op.inm > 0 && len(cs) > 0 {
			if f := cs[(op.inm-1)%len(cs)].files[req.path]; f != nil {
				req.inm = f.etag
				req.header.Set("If-None-Match", `"`+f.etag+`"`)
			}
		}
	case opAPI:
		req.route = routeInfo
		switch op.api {
		case apiInfo:
			req.url, req.rev = api, modelRev{kind: revMain}
		case apiRevision:
			req.url = api + "/revision/" + rev
		case apiExpandPrivate, apiExpandGated, apiExpandBoth:
			q := []string{"expand=private", "expand=gated", "expand=private&expand=gated"}[op.api-apiExpandPrivate]
			req.url, req.rev = api+"?"+q, modelRev{kind: revMain}
		case apiTree, apiTreeDir, apiTreeMissing:
			req.route, req.url = routeTree, api+"/tree/"+rev
			if op.api != apiTree {
				req.path = map[bool]string{true: "data", false: "config.json"}[spec.typ == hub.Dataset]
				if op.api == apiTreeMissing {
					req.path = "nodir"
				}
				req.url += "/" + req.path
			}
		case apiPathsInfo:
			ps := modelPaths[spec.typ]
			req.route, req.method, req.url = routePathsInfo, http.MethodPost, api+"/paths-info/"+rev
			req.paths = []string{ps[0], ps[len(ps)-2], ps[len(ps)-1]}
			form := url.Values{"paths": req.paths}
			req.body = []byte(form.Encode())
			req.header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	case opTensor:
		base, q := "/models/"+spec.id, "?revision="+url.QueryEscape(rev)
		switch op.tensor {
		case tensorGet:
			req.route, req.names = routeTensor, []string{modelTensorNames[op.name]}
			req.url = base + "/tensors/" + req.names[0] + q
		case tensorList:
			req.route, req.url = routeTensorList, base+"/tensors"+q
		case tensorSubset:
			req.route, req.names = routeSubset, []string{"w1", modelTensorNames[op.name]}
			if req.names[1] == "w1" {
				req.names = req.names[:1]
			}
			req.url = base + "/safetensors" + q + "&name=" + strings.Join(req.names, "&name=")
		}
	case opPass:
		req.route, req.method, req.url = routePass, http.MethodGet, passPath
	case opStage:
		w.stageRequest(req, spec.id, rev, modelTensorNames[op.name])
	}
	return req
}

// pairOp is the request a pair probe sends, as an op of its own.
func pairOp(op modelOp) modelOp {
	p := modelOp{caller: op.caller, method: http.MethodGet, rev: modelRev{kind: revMain}}
	switch op.route {
	case 0:
		p.kind, p.path = opFile, 0
	case 1:
		p.kind, p.path, p.method = opFile, 2, http.MethodHead
	case 2:
		p.kind, p.api = opAPI, apiInfo
	case 3:
		p.kind, p.api = opAPI, apiTree
	default:
		p.kind, p.tensor = opTensor, tensorList
	}
	return p
}
