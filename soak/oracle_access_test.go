package soak

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// infoBody is repo info as the Hub answers it for commit c.
func infoBody(t *testing.T, c *commitFix, private bool, gated any) []byte {
	t.Helper()
	type sib struct {
		RFilename string `json:"rfilename"`
		Size      int64  `json:"size"`
	}
	var sibs []sib
	for _, p := range c.paths {
		sibs = append(sibs, sib{p, c.files[p].size()})
	}
	b, err := json.Marshal(map[string]any{"_id": "x", "id": c.repo.ID(), "sha": c.id, "private": private, "gated": gated, "siblings": sibs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// treeBody is a tree or paths-info answer listing paths of c.
func treeBody(t *testing.T, c *commitFix, paths []string) []byte {
	t.Helper()
	var out []map[string]any
	for _, p := range paths {
		b := c.files[p]
		if b == nil {
			continue
		}
		e := map[string]any{"type": "file", "path": p, "size": b.size(), "oid": b.etag}
		if b.lfs {
			e["oid"] = "x"
			e["lfs"] = map[string]any{"oid": b.etag}
		}
		out = append(out, e)
	}
	body, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// The Hub serves a gated repo's metadata to anyone, anonymous callers and
// tokens approved nowhere included: repo info (with gated set), a
// revision's info, the tree and paths-info. Refusing it is wrong, and so is
// info that misstates the gate.
func TestOracleGatedMetadataIsPublic(t *testing.T) {
	o := newTestOracle(t)
	now := time.Now()
	c := o.head("soak/gated")
	for _, caller := range []string{anon, tokCarol, tokAlice} {
		name := callerName(caller)
		info := &op{kind: opInfo, caller: caller, repo: c.repo, rev: "main"}
		wantOut(t, name+": info", o.judge(o.answer(info, now, 200, infoBody(t, c, false, "manual"))), outServed, "")
		wantOut(t, name+": info saying not gated", o.judge(o.answer(info, now, 200, infoBody(t, c, false, false))), outViolation, "wrong-bytes")
		wantOut(t, name+": info saying private", o.judge(o.answer(info, now, 200, infoBody(t, c, true, "manual"))), outViolation, "wrong-bytes")
		rev := &op{kind: opInfo, caller: caller, repo: c.repo, rev: c.id}
		wantOut(t, name+": a revision's info", o.judge(o.answer(rev, now, 200, infoBody(t, c, false, "auto"))), outServed, "")
		tree := &op{kind: opTree, caller: caller, repo: c.repo, rev: "main"}
		wantOut(t, name+": tree", o.judge(o.answer(tree, now, 200, treeBody(t, c, c.paths))), outServed, "")
		paths := &op{kind: opPathsInfo, caller: caller, repo: c.repo, rev: "main", paths: []string{"config.json", "missing/x.bin"}}
		wantOut(t, name+": paths-info", o.judge(o.answer(paths, now, 200, treeBody(t, c, []string{"config.json"}))), outServed, "")
		wantOut(t, name+": paths-info listing a path not asked", o.judge(o.answer(paths, now, 200, treeBody(t, c, c.paths))), outViolation, "wrong-bytes")
		if caller != tokAlice {
			wantOut(t, name+": info refused", o.judge(o.answer(info, now, 401, nil, "X-Error-Code", "GatedRepo")), outViolation, "status")
			wantOut(t, name+": tree refused", o.judge(o.answer(tree, now, 403, nil, "X-Error-Code", "GatedRepo")), outViolation, "status")
		}
	}
}

// expand= projects repo info: _id, id and the fields asked for, no more,
// no less, with the values the repo has.
func TestOracleExpandProjection(t *testing.T) {
	o := newTestOracle(t)
	now := time.Now()
	gated, llm := hub.MustRepo(hub.Model, "soak/gated"), hub.MustRepo(hub.Model, "soak/llm")
	cases := []struct {
		repo   hub.Repo
		expand []string
		body   string
		out    outcome
	}{
		{gated, []string{"private"}, `{"_id":"x","id":"soak/gated","private":false}`, outServed},
		{gated, []string{"gated"}, `{"_id":"x","id":"soak/gated","gated":"manual"}`, outServed},
		{gated, []string{"private", "gated"}, `{"_id":"x","id":"soak/gated","private":false,"gated":"auto"}`, outServed},
		{llm, []string{"gated"}, `{"_id":"x","id":"soak/llm","gated":false}`, outServed},
		{gated, []string{"gated"}, `{"_id":"x","id":"soak/gated","gated":false}`, outViolation},               // the gate misstated
		{gated, []string{"private"}, `{"_id":"x","id":"soak/gated"}`, outViolation},                           // a field asked for left out
		{gated, []string{"private"}, `{"_id":"x","id":"soak/gated","private":false,"sha":"x"}`, outViolation}, // not a projection
		{llm, []string{"private"}, `{"_id":"x","id":"soak/gated","private":false}`, outViolation},             // another repo
	}
	for _, c := range cases {
		q := &op{kind: opInfo, caller: anon, repo: c.repo, rev: "main", expand: c.expand}
		wantOut(t, fmt.Sprintf("%s %v %s", c.repo, c.expand, c.body), o.judge(o.answer(q, now, 200, []byte(c.body))), c.out, "")
	}
}

// The attack of the review: callers the Hub refuses a gated repo's files
// read its metadata (which it lets them), then ask for the files while the
// upstream is down. Any byte, size, etag, commit or existence answer is a
// violation; a refusal or a plain 503 is right.
func TestOracleGatedFilesStayGated(t *testing.T) {
	o := newTestOracle(t)
	now := time.Now()
	c := o.head("soak/gated")
	f := c.files["config.json"]
	size := fmt.Sprint(f.size())
	for _, caller := range []string{anon, tokCarol} {
		name := callerName(caller)
		whole := &op{kind: opWhole, caller: caller, repo: c.repo, rev: "main", path: "config.json"}
		wantOut(t, name+": the file", o.judge(o.answer(whole, now, 200, f.data, "X-Repo-Commit", c.id, "Content-Length", size)), outViolation, "access")
		wantOut(t, name+": 503", o.judge(o.answer(whole, now, 503, nil, "X-Error-Code", "Unverifiable")), outUnavailable, "")
		wantOut(t, name+": 503 naming the commit", o.judge(o.answer(whole, now, 503, nil, "X-Error-Code", "Unverifiable", "X-Repo-Commit", c.id)), outViolation, "access")
		head := &op{kind: opHead, caller: caller, repo: c.repo, rev: "main", path: "config.json"}
		wantOut(t, name+": HEAD", o.judge(o.answer(head, now, 200, nil, "X-Repo-Commit", c.id, "ETag", `"`+f.etag+`"`, "X-Linked-Size", size)), outViolation, "access")
		wantOut(t, name+": a refusal with the size", o.judge(o.answer(head, now, map[string]int{anon: 401, tokCarol: 403}[caller], nil,
			"X-Error-Code", "GatedRepo", "X-Linked-Size", size)), outViolation, "access")
		rng := &op{kind: opRange, caller: caller, repo: c.repo, rev: "main", path: "config.json", rng: [2]int64{1 << 30, -1}}
		wantOut(t, name+": 416, which tells the size", o.judge(o.answer(rng, now, 416, nil, "Content-Range", "bytes */"+size)), outViolation, "access")
		missing := &op{kind: opMissing, caller: caller, repo: c.repo, rev: "main", path: "missing/x.bin"}
		wantOut(t, name+": EntryNotFound", o.judge(o.answer(missing, now, 404, nil, "X-Error-Code", "EntryNotFound", "X-Repo-Commit", c.id)), outViolation, "access")
		tensor := &op{kind: opTensor, caller: caller, repo: c.repo, rev: "main", tensor: "norm.weight"}
		wantOut(t, name+": a tensor", o.judge(o.answer(tensor, now, 200, c.tensorBytes(c.tensors["norm.weight"]), "X-Repo-Commit", c.id)), outViolation, "access")
		listing := &op{kind: opListing, caller: caller, repo: c.repo, rev: "main"}
		wantOut(t, name+": the listing", o.judge(o.answer(listing, now, 200, []byte(`{"commit":"`+c.id+`"}`))), outViolation, "access")
	}
}

// The Hub checks the repo before the revision: an allowed caller learns a
// branch does not exist, a refused one only that it is refused.
func TestOracleOrderOfChecks(t *testing.T) {
	o := newTestOracle(t)
	now := time.Now()
	gated, private := hub.MustRepo(hub.Model, "soak/gated"), hub.MustRepo(hub.Model, "soak/private")
	notFound := []string{"X-Error-Code", "RevisionNotFound"}
	cases := []struct {
		name   string
		caller string
		repo   hub.Repo
		kind   opKind
		out    outcome
		class  string
	}{
		{"alice, a gated file", tokAlice, gated, opWhole, outMissing, ""},
		{"anonymous, a gated file", anon, gated, opWhole, outViolation, "access"},
		{"carol, a gated file's HEAD", tokCarol, gated, opHead, outViolation, "access"},
		{"anonymous, a gated repo's info", anon, gated, opInfo, outMissing, ""},
		{"anonymous, a private repo's info", anon, private, opInfo, outViolation, "access"},
		{"alice, a private repo's info", tokAlice, private, opInfo, outMissing, ""},
	}
	for _, c := range cases {
		q := &op{kind: c.kind, caller: c.caller, repo: c.repo, rev: noSuchRev, path: "config.json"}
		wantOut(t, c.name, o.judge(o.answer(q, now, 404, nil, notFound...)), c.out, c.class)
	}
	q := &op{kind: opInfo, caller: tokAlice, repo: gated, rev: noSuchRev}
	wantOut(t, "a branch that does not exist, served", o.judge(o.answer(q, now, 200, []byte("{}"))), outViolation, "status")
}

// A pass-through POST upstream answers 500: a refusal or a failure is
// right, a 2xx is not.
func TestOracleBait(t *testing.T) {
	o := newTestOracle(t)
	now := time.Now()
	q := &op{kind: opBait, caller: anon, repo: hub.MustRepo(hub.Model, "soak/llm"), rev: "main"}
	wantOut(t, "500 relayed", o.judge(o.answer(q, now, 500, nil)), outRefused, "")
	wantOut(t, "502", o.judge(o.answer(q, now, 502, nil)), outRefused, "")
	wantOut(t, "503 (breaker open)", o.judge(o.answer(q, now, 503, nil)), outUnavailable, "")
	wantOut(t, "200", o.judge(o.answer(q, now, 200, nil)), outViolation, "status")
}
