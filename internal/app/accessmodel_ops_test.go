package app_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// The operations of a model run: requests on every route by every kind of
// caller, changes to the hub (access, tokens, commits), upstream outages of
// every kind, proxy restarts, and the clock. An op is plain data, so a
// history replays (and shrinks) in a fresh world.

type opKind int

const (
	opFile      opKind = iota // GET or HEAD of /{repo}/resolve|raw/{rev}/{path}
	opAPI                     // repo info, tree, paths-info
	opTensor                  // /models/{repo}/tensors[/{name}], /safetensors
	opPass                    // a client's pick of upstream path, relayed uncached
	opPair                    // a stranger asks the private repo and the missing one the same thing
	opStage                   // POST /gpu/stage of one tensor on the admin listener, as a caller
	opStoreRead               // GET or HEAD of a file, whole or a range, through node B (which shares the store)
	opAccess                  // the owner gates, ungates, hides or shows a repo
	opRevoke                  // a token loses every approval
	opRegrant                 // and gets them back
	opApprove                 // a token is approved for one repo
	opPush                    // a new commit on main
	opUpstream                // the upstream changes state
	opRestart                 // hubproxy (node A, or node B) restarts on the same cache
	opClock                   // a long pause
	nOpKinds
)

var opKindNames = [...]string{"file", "api", "tensor", "pass", "pair", "stage", "store-read", "access", "revoke", "regrant",
	"approve", "push", "upstream", "restart", "clock"}

func (k opKind) String() string { return opKindNames[k] }

type revKind int

const (
	revMain revKind = iota
	revCommit
	revMissing
)

// modelRev is a revision as an op names it: main, the commit-th commit (taken
// modulo the repo's commits when the op runs), or one that never exists.
type modelRev struct {
	kind   revKind
	commit int
}

type apiKind int

const (
	apiInfo apiKind = iota
	apiRevision
	apiExpandPrivate
	apiExpandGated
	apiExpandBoth
	apiTree
	apiTreeDir
	apiTreeMissing
	apiPathsInfo
	nAPIKinds
)

type tensorKind int

const (
	tensorGet tensorKind = iota
	tensorList
	tensorSubset
)

// upState is what the upstream does. The first four leave it answering
// (only the CDN, or one path a client can pick, fails); the rest are
// outages, in which hubproxy may answer from what it learnt before, within
// its configured trust (access-ttl, public-ttl, outage-grace).
type upState int

const (
	upOK         upState = iota
	upCDN503             // the CDN fails; the hub answers
	upPath503            // one client-chosen API path answers 503
	upPathHang           // one client-chosen API path never answers
	upAll503             // every hub route answers 503 (the CDN still serves)
	upAll429             // everything answers 429, as a rate limit any caller can provoke
	upAPI503             // the JSON API fails, resolves work
	upResolve503         // resolves fail, the JSON API works
	upHung               // every request is held until the caller gives up
	upGone               // connections are refused (hub and CDN)
	nUpStates
)

func (u upState) down() bool { return u >= upAll503 }

var upNames = [...]string{"up", "cdn-503", "path-503", "path-hang", "all-503", "all-429", "api-503", "resolve-503", "hung", "gone"}

func (u upState) String() string { return upNames[u] }

// passPath is the upstream path a client can pick to make the upstream fail
// (upPath503, upPathHang): any /api/ path hubproxy relays uncached.
const passPath = "/api/models/org/public/discussions"

type modelOp struct {
	kind   opKind
	dt     time.Duration // the clock moves this much before the op
	caller int
	repo   int
	rev    modelRev
	path   int
	method string
	raw    bool
	rng    [2]int64 // Range start and length; length 0: no Range
	inm    int      // If-None-Match with the etag of commit inm-1; 0: none
	api    apiKind
	tensor tensorKind
	name   int // tensor name
	gated  bool
	priv   bool
	up     upState
	route  int  // opPair: which request
	nodeB  bool // opRestart: node B restarts, not node A
}

// genOps draws n operations: requests and changes from rng, and from side
// (a stream of their own, so that adding them left the histories of the
// others as they were) GPU stagings and reads through node B, now and then
// between them. Requests dwell on a focus (a repo and a caller) that moves
// now and then, so that what one request taught the proxy is soon put to
// use by the next ones: leaks need such chains (a caller's metadata answer,
// another's fill, an outage, the first caller's read).
func genOps(rng, side *rand.Rand, n int) []modelOp {
	ops := make([]modelOp, 0, n)
	up := upOK
	focusRepo, focusCaller := 1, 0
	for len(ops) < n {
		if side.IntN(5) == 0 {
			ops = append(ops, genSideOps(side, focusRepo, focusCaller, up)...)
			continue
		}
		if rng.IntN(10) == 0 {
			focusRepo, focusCaller = rng.IntN(len(modelRepoSpecs)-1), rng.IntN(len(modelCallers))
		}
		op := genOp(rng, up)
		if op.kind < opAccess && op.kind != opPair {
			if rng.IntN(5) < 3 {
				op.repo = focusRepo
				if op.kind == opFile {
					op.path = rng.IntN(len(modelPaths[modelRepoSpecs[op.repo].typ]))
				}
			}
			if rng.IntN(2) == 0 {
				op.caller = focusCaller
			}
			op = fixOp(op)
		}
		if op.kind == opUpstream {
			up = op.up
		}
		ops = append(ops, op)
	}
	return ops[:n]
}

// genSideOps draws a GPU staging of a tensor (on node A's admin API) or a
// read through node B, on the focus repo more often than not, or now and
// then a restart of either node. A staging is by the focus caller half the
// time, as other requests are; node B's reader is anyone. Two reads on node B in three are set up to tempt it to let the store
// stand in for the access decision: node A first reads the file for the
// granted caller, so its chunks are in the store; and for one of them,
// node B looks the file up or reads it for the granted caller too (so it
// knows which chunks are the file's, or holds them, from the store), and
// the upstream goes away (hung, gone, every route 503) just for the read,
// by another caller more often than not.
func genSideOps(rng *rand.Rand, focusRepo, focusCaller int, up upState) []modelOp {
	op := modelOp{caller: rng.IntN(len(modelCallers)), repo: rng.IntN(len(modelRepoSpecs) - 1), method: http.MethodGet,
		rev: modelRev{kind: revMain}}
	switch r := rng.IntN(20); {
	case r == 0:
		op.repo = repoMissing
	case r < 12:
		op.repo = focusRepo
	}
	if rng.IntN(5) < 2 {
		op.dt = time.Duration(rng.IntN(2000)) * time.Millisecond
	}
	switch p := rng.IntN(10); {
	case p < 2:
		op.rev = modelRev{kind: revCommit, commit: rng.IntN(8)}
	case p == 2 && rng.IntN(2) == 0:
		op.rev = modelRev{kind: revMissing}
	}
	k := rng.IntN(8)
	if k == 0 {
		return []modelOp{{kind: opRestart, nodeB: rng.IntN(2) == 0}}
	}
	if k < 4 {
		op.kind, op.method, op.name = opStage, http.MethodPost, rng.IntN(len(modelTensorNames))
		if rng.IntN(2) == 0 {
			op.caller = focusCaller
		}
		return []modelOp{fixOp(op)}
	}
	op.kind = opStoreRead
	op.path = 1 // model.safetensors, data/big.bin: large files, whose fills are shared
	switch typ := modelRepoSpecs[op.repo].typ; {
	case rng.IntN(3) == 0:
		op.path = rng.IntN(len(modelPaths[typ]))
	case typ == hub.Model:
		op.path += rng.IntN(2) // or weights.bin
	}
	switch m := rng.IntN(6); {
	case m == 0:
		op.method = http.MethodHead
	case m < 4:
		op.rng = [2]int64{int64(rng.IntN(40 << 10)), int64(1 + rng.IntN(20<<10))}
	}
	fill := modelOp{kind: opFile, caller: 1, repo: op.repo, path: op.path, method: http.MethodGet, rev: op.rev}
	switch rng.IntN(3) {
	case 0:
		return []modelOp{op}
	case 1:
		return []modelOp{fill, op}
	}
	look := modelOp{kind: opStoreRead, caller: 1, repo: op.repo, path: op.path, method: http.MethodHead, rev: op.rev}
	if rng.IntN(2) == 0 {
		look.method = http.MethodGet // node B then holds the file, filled from the store
	}
	if rng.IntN(5) != 0 {
		op.caller = []int{0, 2, 3, 4}[rng.IntN(4)] // not granted
	}
	if up != upOK {
		return []modelOp{fill, look, op}
	}
	outage := []upState{upAll503, upHung, upGone}[rng.IntN(3)]
	// Asked twice: the first request finds the upstream gone, and the
	// second, with node B knowing it is, is where it must not let the
	// store decide.
	again := op
	again.dt = 0
	return []modelOp{fill, look, {kind: opUpstream, up: outage}, op, again, {kind: opUpstream, up: upOK}}
}

func genOp(rng *rand.Rand, up upState) modelOp {
	op := modelOp{caller: rng.IntN(len(modelCallers)), repo: rng.IntN(len(modelRepoSpecs) - 1), method: "GET"}
	if rng.IntN(12) == 0 {
		op.repo = repoMissing
	}
	if rng.IntN(5) < 2 {
		op.dt = time.Duration(rng.IntN(2000)) * time.Millisecond
	}
	op.rev = modelRev{kind: revMain}
	switch p := rng.IntN(10); {
	case p < 2:
		op.rev = modelRev{kind: revCommit, commit: rng.IntN(8)}
	case p == 2 && rng.IntN(2) == 0:
		op.rev = modelRev{kind: revMissing}
	}
	switch k := rng.IntN(100); {
	case k < 30:
		op.kind = opFile
		op.path = rng.IntN(len(modelPaths[modelRepoSpecs[op.repo].typ]))
		switch m := rng.IntN(20); {
		case m < 5:
			op.method = "HEAD"
		case m < 9:
			op.rng = [2]int64{int64(rng.IntN(48 << 10)), int64(1 + rng.IntN(20<<10))}
			if rng.IntN(8) == 0 {
				op.rng[0] = 1 << 30 // past every end: 416, which tells the size
			}
		case m == 9:
			op.raw = true
		}
		if rng.IntN(8) == 0 {
			op.inm = 1 + rng.IntN(6)
		}
	case k < 46:
		op.kind = opAPI
		op.api = apiKind(rng.IntN(int(nAPIKinds)))
		if rng.IntN(10) == 0 {
			op.method = "HEAD"
		}
	case k < 58:
		op.kind = opTensor
		op.tensor = tensorKind(rng.IntN(6) / 3) // get, get, get, list, list, list
		if rng.IntN(5) == 0 {
			op.tensor = tensorSubset
		}
		op.name = rng.IntN(len(modelTensorNames))
		if rng.IntN(10) == 0 {
			op.method = "HEAD"
		}
	case k < 62:
		op.kind = opPass
	case k < 66:
		op.kind = opPair
		op.route = rng.IntN(5)
	case k < 72:
		op.kind = opAccess
		op.gated, op.priv = rng.IntN(2) == 0, rng.IntN(3) == 0
	case k < 75:
		op.kind = opRevoke
	case k < 78:
		op.kind = opRegrant
	case k < 80:
		op.kind = opApprove
	case k < 84:
		op.kind = opPush
	case k < 92:
		op.kind = opUpstream
		// Outages are short: most changes away from up go back to it.
		if up != upOK && rng.IntN(4) != 0 {
			op.up = upOK
		} else {
			op.up = upState(1 + rng.IntN(int(nUpStates)-1))
		}
	case k < 94:
		op.kind = opRestart
	default:
		op.kind = opClock
		op.dt = []time.Duration{12 * time.Second, 30 * time.Second, 2 * time.Minute, 6 * time.Minute}[rng.IntN(4)]
	}
	return fixOp(op)
}

// fixOp keeps an op within what its kind can name.
func fixOp(op modelOp) modelOp {
	if (op.kind == opTensor || op.kind == opStage) && modelRepoSpecs[op.repo].typ == hub.Dataset {
		op.repo = 1 // the tensor routes are for models
	}
	if op.repo == repoMissing && op.kind >= opAccess && op.kind <= opPush {
		op.repo = 0 // changes need a repo that exists
	}
	return op
}

// approveToken is the token opApprove approves: the one never approved.
const approveCaller = 2 // denied

// revokeCaller is the token opRevoke and opRegrant act on.
const revokeCaller = 4 // revoked

func (r modelRev) String() string {
	switch r.kind {
	case revCommit:
		return fmt.Sprintf("commit#%d", r.commit)
	case revMissing:
		return "no-such-rev"
	}
	return "main"
}

var apiNames = [...]string{"info", "revision", "expand=private", "expand=gated", "expand=private,gated", "tree", "tree/dir", "tree/missing-dir", "paths-info"}

func (op modelOp) String() string {
	var b strings.Builder
	if op.dt > 0 {
		fmt.Fprintf(&b, "+%s ", op.dt)
	}
	who, repo := modelCallers[op.caller].name, modelRepoSpecs[op.repo].id
	if modelRepoSpecs[op.repo].typ == hub.Dataset {
		repo = "datasets/" + repo
	}
	switch op.kind {
	case opFile:
		kind := "resolve"
		if op.raw {
			kind = "raw"
		}
		fmt.Fprintf(&b, "%s %s %s %s@%s:%s", who, op.method, kind, repo, op.rev, modelPaths[modelRepoSpecs[op.repo].typ][op.path])
		if op.rng[1] > 0 {
			fmt.Fprintf(&b, " Range %d+%d", op.rng[0], op.rng[1])
		}
		if op.inm > 0 {
			fmt.Fprintf(&b, " If-None-Match etag(commit#%d)", op.inm-1)
		}
	case opAPI:
		fmt.Fprintf(&b, "%s %s api %s %s@%s", who, op.method, apiNames[op.api], repo, op.rev)
	case opTensor:
		kind := []string{"tensor " + modelTensorNames[op.name], "tensor list", "subset w1+" + modelTensorNames[op.name]}[op.tensor]
		fmt.Fprintf(&b, "%s %s %s %s@%s", who, op.method, kind, repo, op.rev)
	case opPass:
		fmt.Fprintf(&b, "%s GET %s (relayed uncached)", who, passPath)
	case opStage:
		fmt.Fprintf(&b, "%s admin POST /gpu/stage tensor %s of %s@%s", who, modelTensorNames[op.name], repo, op.rev)
	case opStoreRead:
		fmt.Fprintf(&b, "%s %s resolve %s@%s:%s on node B", who, op.method, repo, op.rev, modelPaths[modelRepoSpecs[op.repo].typ][op.path])
		if op.rng[1] > 0 {
			fmt.Fprintf(&b, " Range %d+%d", op.rng[0], op.rng[1])
		}
	case opPair:
		fmt.Fprintf(&b, "%s pair probe #%d: org/private vs org/missing", who, op.route)
	case opAccess:
		fmt.Fprintf(&b, "hub: %s gated=%v private=%v", repo, op.gated, op.priv)
	case opRevoke:
		fmt.Fprintf(&b, "hub: revoke %s", modelCallers[revokeCaller].name)
	case opRegrant:
		fmt.Fprintf(&b, "hub: give %s its approvals back", modelCallers[revokeCaller].name)
	case opApprove:
		fmt.Fprintf(&b, "hub: approve %s for %s", modelCallers[approveCaller].name, repo)
	case opPush:
		fmt.Fprintf(&b, "hub: push a commit to %s", repo)
	case opUpstream:
		fmt.Fprintf(&b, "upstream: %s", op.up)
	case opRestart:
		if op.nodeB {
			b.WriteString("hubproxy: restart node B on the same cache")
		} else {
			b.WriteString("hubproxy: restart on the same cache")
		}
	case opClock:
		b.WriteString("clock")
	}
	return b.String()
}
