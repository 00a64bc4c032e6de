package soak

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// testOracle builds the soak's world on one fake hub, with its history.
type testOracle struct {
	*oracle
	h *hubtest.Hub
}

func newTestOracle(t *testing.T) testOracle {
	t.Helper()
	h := hubtest.NewT(t, hubtest.Options{})
	w, err := newWorld([]*hubtest.Hub{h}, 7, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	st := &hubState{gated: map[hub.Repo]bool{}, private: map[hub.Repo]bool{}, approved: map[hub.Repo]map[string]bool{},
		revoked: map[string]bool{}, heads: map[hub.Repo]string{}}
	for _, fix := range w.repos {
		st.gated[fix.repo], st.private[fix.repo] = fix.gated, fix.private
		st.approved[fix.repo] = map[string]bool{}
		for _, tok := range fix.approved {
			st.approved[fix.repo][tok] = true
		}
		st.heads[fix.repo] = w.first[fix.repo]
	}
	return testOracle{oracle: &oracle{w: w, hist: newHistory(st, time.Now().Add(-time.Hour))}, h: h}
}

// answer is a response to o sent at sent, with a right body and headers
// for the file or tensor at the repo's head, which mutate may spoil.
func (o testOracle) answer(q *op, sent time.Time, status int, body []byte, hdr ...string) *result {
	r := &result{op: q, sent: sent, headers: sent.Add(10 * time.Millisecond), done: sent.Add(20 * time.Millisecond),
		status: status, header: http.Header{}, body: body}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.header.Set(hdr[i], hdr[i+1])
	}
	return r
}

func (o testOracle) head(id string) *commitFix {
	return o.w.commit(o.hist.current().heads[hub.MustRepo(hub.Model, id)])
}

func wantOut(t *testing.T, name string, j judgement, out outcome, class string) {
	t.Helper()
	if j.out != out || (class != "" && j.class != class) {
		t.Errorf("%s: judged %v %s (%s), want %v %s", name, j.out, j.class, j.detail, out, class)
	}
}

func TestOracleWholeFiles(t *testing.T) {
	o := newTestOracle(t)
	c := o.head("soak/llm")
	f := c.files["config.json"]
	q := &op{kind: opWhole, caller: anon, repo: c.repo, rev: "main", path: "config.json"}
	now := time.Now()
	ok := func(body []byte) *result {
		return o.answer(q, now, 200, body, "X-Repo-Commit", c.id, "Content-Length", fmt.Sprint(f.size()))
	}
	wantOut(t, "right", o.judge(ok(f.data)), outServed, "")
	bad := append([]byte(nil), f.data...)
	bad[3] ^= 1
	wantOut(t, "a flipped byte", o.judge(ok(bad)), outViolation, "wrong-bytes")
	cut := ok(f.data[:10])
	cut.bodyErr = fmt.Errorf("unexpected EOF")
	wantOut(t, "cut short, right so far", o.judge(cut), outUnavailable, "")
	cut = ok(bad[:10])
	cut.bodyErr = fmt.Errorf("unexpected EOF")
	wantOut(t, "cut short after a wrong byte", o.judge(cut), outViolation, "wrong-bytes")
	wantOut(t, "another commit", o.judge(o.answer(q, now, 200, f.data, "X-Repo-Commit", o.head("soak/gated").id)), outViolation, "status")
	wantOut(t, "a 500", o.judge(o.answer(q, now, 500, nil)), outViolation, "status")
	wantOut(t, "a 503", o.judge(o.answer(q, now, 503, nil, "X-Error-Code", "Unverifiable")), outUnavailable, "")

	// The file the CorruptBytes fault hits may break off after wrong bytes
	// (hubproxy cannot know before the hash is complete), never complete.
	blob := c.files["blob.bin"]
	q = &op{kind: opWhole, caller: tokAlice, repo: c.repo, rev: c.id, path: "blob.bin"}
	wrong := append([]byte(nil), blob.data...)
	wrong[0] ^= 0xff
	r := o.answer(q, now, 200, wrong[:4096], "X-Repo-Commit", c.id, "Content-Length", fmt.Sprint(blob.size()))
	r.bodyErr = fmt.Errorf("connection reset")
	wantOut(t, "corrupt file cut short", o.judge(r), outUnavailable, "")
	r = o.answer(q, now, 200, wrong, "X-Repo-Commit", c.id, "Content-Length", fmt.Sprint(blob.size()))
	wantOut(t, "corrupt file completed", o.judge(r), outViolation, "wrong-bytes")
}

func TestOracleRanges(t *testing.T) {
	o := newTestOracle(t)
	c := o.head("soak/llm")
	f := c.files["tokenizer.json"]
	q := &op{kind: opRange, caller: tokCarol, repo: c.repo, rev: "main", path: "tokenizer.json", rng: [2]int64{100, 199}}
	now := time.Now()
	cr := fmt.Sprintf("bytes 100-199/%d", f.size())
	wantOut(t, "right", o.judge(o.answer(q, now, 206, f.data[100:200], "X-Repo-Commit", c.id, "Content-Range", cr)), outServed, "")
	wantOut(t, "off by one", o.judge(o.answer(q, now, 206, f.data[101:201], "X-Repo-Commit", c.id, "Content-Range", cr)), outViolation, "wrong-bytes")
	wantOut(t, "a lying Content-Range", o.judge(o.answer(q, now, 206, f.data[100:200], "X-Repo-Commit", c.id, "Content-Range", "bytes 101-200/1")), outViolation, "wrong-bytes")
	wantOut(t, "416 for a satisfiable range", o.judge(o.answer(q, now, 416, nil, "X-Repo-Commit", c.id)), outViolation, "status")
	suffix := &op{kind: opRange, caller: anon, repo: c.repo, rev: "main", path: "tokenizer.json", rng: [2]int64{-1, 10}}
	wantOut(t, "suffix", o.judge(o.answer(suffix, now, 206, f.data[f.size()-10:], "X-Repo-Commit", c.id,
		"Content-Range", fmt.Sprintf("bytes %d-%d/%d", f.size()-10, f.size()-1, f.size()))), outServed, "")
}

// Refusals as the Hub gives them: a gated repo's files, a private repo's
// everything. (A gated repo's metadata is anyone's: oracle_access_test.go.)
func TestOracleRefusals(t *testing.T) {
	o := newTestOracle(t)
	now := time.Now()
	gated, private := hub.MustRepo(hub.Model, "soak/gated"), hub.MustRepo(hub.Model, "soak/private")
	cases := []struct {
		caller string
		repo   hub.Repo
		kind   opKind
		status int
		code   string
	}{
		{anon, gated, opWhole, 401, "GatedRepo"},
		{tokCarol, gated, opWhole, 403, "GatedRepo"},
		{anon, private, opWhole, 401, "RepoNotFound"},
		{tokCarol, private, opWhole, 404, "RepoNotFound"},
		{tokBob, private, opWhole, 404, "RepoNotFound"},
		{anon, private, opInfo, 401, "RepoNotFound"},
		{tokCarol, private, opTree, 404, "RepoNotFound"},
		{tokBob, private, opPathsInfo, 404, "RepoNotFound"},
	}
	for _, c := range cases {
		q := &op{kind: c.kind, caller: c.caller, repo: c.repo, rev: "main", path: "config.json", paths: []string{"config.json"}}
		name := callerName(c.caller) + " " + c.kind.String() + " on " + c.repo.String()
		wantOut(t, name, o.judge(o.answer(q, now, c.status, nil, "X-Error-Code", c.code)), outRefused, "")
		wrong := 404
		if c.status == 404 {
			wrong = 401
		}
		wantOut(t, name+", wrong status", o.judge(o.answer(q, now, wrong, nil, "X-Error-Code", c.code)), outViolation, "status")
		wantOut(t, name+", served", o.judge(o.answer(q, now, 200, []byte("{}"))), outViolation, "access")
	}
	// Alice, approved, must not be refused.
	q := &op{kind: opWhole, caller: tokAlice, repo: gated, rev: "main", path: "config.json"}
	wantOut(t, "alice refused", o.judge(o.answer(q, now, 403, nil, "X-Error-Code", "GatedRepo")), outViolation, "status")
}

// A revoked token keeps its access for access-ttl (plus the lateness
// allowance), and not a moment longer.
func TestOracleAccessWindow(t *testing.T) {
	o := newTestOracle(t)
	c := o.head("soak/gated")
	f := c.files["config.json"]
	o.hist.change(func() func(*hubState) {
		return func(st *hubState) { st.revoked[tokBob] = true }
	})
	revoked := time.Now()
	q := &op{kind: opWhole, caller: tokBob, repo: c.repo, rev: "main", path: "config.json"}
	served := func(sent time.Time) *result {
		return o.answer(q, sent, 200, f.data, "X-Repo-Commit", c.id, "Content-Length", fmt.Sprint(f.size()))
	}
	j := o.judge(served(revoked.Add(accessTTL - time.Second)))
	wantOut(t, "within access-ttl", j, outServed, "")
	wantOut(t, "within the lateness allowance", o.judge(served(revoked.Add(accessTTL+lateness-200*time.Millisecond))), outServed, "")
	wantOut(t, "past the window", o.judge(served(revoked.Add(accessTTL+lateness+500*time.Millisecond))), outViolation, "access")
	refused := o.answer(q, revoked.Add(-2*time.Second), 403, nil, "X-Error-Code", "GatedRepo")
	refused.headers = revoked.Add(-time.Second)
	wantOut(t, "refused before the revocation", o.judge(refused), outViolation, "status")
	wantOut(t, "refused after it", o.judge(o.answer(q, revoked.Add(time.Second), 403, nil, "X-Error-Code", "GatedRepo")), outRefused, "")
}

// A branch names a commit it had in the revision window; an older head is
// allowed (the cache's refs while upstream is down) but counted stale.
func TestOracleMovingBranch(t *testing.T) {
	o := newTestOracle(t)
	moving := hub.MustRepo(hub.Model, "soak/moving")
	old := o.head("soak/moving")
	var id string
	o.hist.change(func() func(*hubState) {
		files := o.w.nextMovingFiles()
		id = o.h.Commit(moving, "main", files)
		if err := o.w.addCommit(o.h, moving, id, files); err != nil {
			t.Fatal(err)
		}
		return func(st *hubState) { st.heads[moving] = id }
	})
	later := time.Now().Add(time.Minute)
	q := &op{kind: opHead, caller: anon, repo: moving, rev: "main", path: "data.bin"}
	hdr := func(c *commitFix) []string {
		f := c.files["data.bin"]
		return []string{"X-Repo-Commit", c.id, "Content-Length", fmt.Sprint(f.size()), "X-Linked-Size", fmt.Sprint(f.size()), "ETag", `"` + f.etag + `"`}
	}
	j := o.judge(o.answer(q, later, 200, nil, hdr(o.w.commit(id))...))
	wantOut(t, "the new head", j, outServed, "")
	if j.stale {
		t.Error("the current head judged stale")
	}
	j = o.judge(o.answer(q, later, 200, nil, hdr(old)...))
	wantOut(t, "the old head, a minute later", j, outServed, "")
	if !j.stale {
		t.Error("an old head a minute later not judged stale")
	}
	mixed := hdr(o.w.commit(id))
	mixed[len(mixed)-1] = `"` + old.files["data.bin"].etag + `"`
	wantOut(t, "new commit, old ETag", o.judge(o.answer(q, later, 200, nil, mixed...)), outViolation, "wrong-bytes")
}

func TestOracleTensors(t *testing.T) {
	o := newTestOracle(t)
	c := o.head("soak/gated")
	name := "layers.0.attn.weight"
	tf := c.tensors[name]
	now := time.Now()
	q := &op{kind: opShard, caller: tokAlice, repo: c.repo, rev: "main", tensor: name, shard: [3]int{1, 1, 4}}
	want, shape, err := shardOf(c.tensorBytes(tf), tf.dtype, tf.shape, 1, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := shardOf(c.tensorBytes(tf), tf.dtype, tf.shape, 1, 2, 4)
	hdr := []string{"X-Repo-Commit", c.id, "X-Tensor-Dtype", tf.dtype, "X-Tensor-Shape", shapeHeader(shape)}
	wantOut(t, "right shard", o.judge(o.answer(q, now, 200, want, hdr...)), outServed, "")
	wantOut(t, "another rank's shard", o.judge(o.answer(q, now, 200, other, hdr...)), outViolation, "wrong-bytes")
	hdr[len(hdr)-1] = shapeHeader(tf.shape)
	wantOut(t, "the whole tensor's shape", o.judge(o.answer(q, now, 200, want, hdr...)), outViolation, "wrong-bytes")
}
