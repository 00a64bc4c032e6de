package app_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAccessModel is a model-based test of hubproxy's access policy: seeded
// random histories of requests on every route (files, ranges, HEAD,
// If-None-Match, raw, repo info with and without expand=, trees,
// paths-info, tensors, tensor listings, subsets, GPU staging on the admin
// API, and reads through a second node that shares the first's chunk store)
// by anonymous, approved, unapproved, unknown and revoked callers, on
// public, gated, private and missing repos, interleaved with the hub
// changing (gating, hiding, revoking and approving, pushing commits), the
// upstream failing in every way (5xx, 429, hung, gone, the CDN only, the API
// only, one path a client can pick), restarts and the clock. Every answer,
// node B's and every lease's included, is checked against a reference
// model of the Hub (accessmodel_ref_test.go): hubproxy must never give a
// caller content, a size, an ETag, or an existence answer (EntryNotFound,
// RevisionNotFound, GatedRepo for a hidden repo) that the hub would have
// refused that caller at every moment of the window hubproxy is configured
// to trust (access-ttl while the upstream answers; public-ttl and
// outage-grace during an outage); never bytes of another file; never tell a
// private repo from a missing one to a stranger; and, while the upstream
// answers, give one of the hub's own answers.
//
// The budget is fixed for CI; -model.steps, -model.seeds and -model.random
// (or HUBPROXY_MODEL_STEPS / HUBPROXY_MODEL_SEEDS) run longer, as make soak
// does. A failure prints its seed, a shrunk history and the answer, and
// replays with -model.seed.
func TestAccessModel(t *testing.T) {
	steps := flagOrEnv(*modelSteps, "HUBPROXY_MODEL_STEPS", 200)
	seeds := []uint64{1, 2, 3}
	ci := steps >= 200 // the fixed seeds, with at least CI's budget
	if n := flagOrEnv(*modelSeeds, "HUBPROXY_MODEL_SEEDS", 0); n > 0 || *modelRandom {
		base := uint64(1)
		if *modelRandom {
			base = uint64(time.Now().UnixNano())
		}
		seeds = nil
		for i := range max(n, 1) {
			seeds = append(seeds, base+uint64(i)*7919)
		}
	}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	ci = ci && len(seeds) == 3 && seeds[0] == 1 && seeds[2] == 3
	total := map[string]int{}
	start := time.Now()
	for _, seed := range seeds {
		ops := modelHistory(seed, steps)
		if ci {
			// Every kind of operation, in every CI history.
			kinds := map[opKind]int{}
			for _, op := range ops {
				kinds[op.kind]++
			}
			for k := range nOpKinds {
				if kinds[k] == 0 {
					t.Errorf("seed %d: the history has no %s operation", seed, k)
				}
			}
		}
		grace := modelGrace(seed)
		run := runModel(t.TempDir(), grace, ops, false)
		if run.err != nil {
			t.Fatalf("seed %d: %v", seed, run.err)
		}
		for k, v := range run.counts {
			total[k] += v
		}
		if run.failAt >= 0 {
			reportModelFailure(t, seed, steps, grace, ops, run)
			return
		}
	}
	var keys []string
	for k := range total {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %d", k, total[k])
	}
	t.Logf("access model: %d seeds x %d operations in %s; answers:%s", len(seeds), steps, time.Since(start).Round(time.Millisecond), b.String())
	// A model that never saw a grant or a refusal proves nothing.
	if total["served, gated or private repo"] == 0 || total["refused, as the hub does"] == 0 {
		t.Errorf("the histories never had gated or private content served, or a refusal: the model checked nothing")
	}
	if ci {
		// Nor does one whose stagings and store reads were never both
		// served and refused, or whose node B never read the store.
		for _, k := range []string{"gpu stage: served", "gpu stage: refused", "node B read: served", "node B read: refused",
			"node B read: served with bytes from the shared store"} {
			if total[k] == 0 {
				t.Errorf("the histories never had %q: the model did not check it", k)
			}
		}
	}
}

var (
	modelSteps  = flag.Int("model.steps", 0, "TestAccessModel: operations per seed (default HUBPROXY_MODEL_STEPS, else 200)")
	modelSeeds  = flag.Int("model.seeds", 0, "TestAccessModel: how many seeds (default HUBPROXY_MODEL_SEEDS, else the fixed CI seeds)")
	modelSeed   = flag.Uint64("model.seed", 0, "TestAccessModel: run only this seed (replays a failure)")
	modelRandom = flag.Bool("model.random", false, "TestAccessModel: seeds from the clock rather than the fixed CI seeds")
	modelShrink = flag.Duration("model.shrink", 40*time.Second, "TestAccessModel: time spent shrinking a failing history")
)

func flagOrEnv(v int, env string, def int) int {
	if v > 0 {
		return v
	}
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n > 0 {
		return n
	}
	return def
}

// modelHistory is seed's history; its first k operations are the same
// whatever the length, so a failure replays with any steps past it.
func modelHistory(seed uint64, steps int) []modelOp {
	return genOps(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, seed)), steps)
}

// modelGrace alternates outage-grace between off and longer than
// access-ttl, so both trust rules are exercised.
func modelGrace(seed uint64) time.Duration {
	if seed%2 == 0 {
		return 3 * time.Minute
	}
	return 0
}

// modelRun is the outcome of one history.
type modelRun struct {
	failAt   int // the operation whose answer broke a property; -1 if none did
	verdicts []modelVerdict
	trace    []string // with verbose: each operation and its answer
	counts   map[string]int
	logTail  []string
	err      error // the world could not be built or changed
}

// runModel runs ops in a fresh world and stops at the first broken property.
func runModel(dir string, grace time.Duration, ops []modelOp, verbose bool) modelRun {
	w, err := newModelWorld(dir, grace)
	if err != nil {
		return modelRun{failAt: -1, err: err}
	}
	defer w.close()
	run := modelRun{failAt: -1, counts: w.counts}
	for i, op := range ops {
		vs, answer, err := w.exec(op)
		if err != nil {
			run.err = fmt.Errorf("operation #%d (%s): %w", i, op, err)
			return run
		}
		if verbose {
			line := fmt.Sprintf("#%d [t=%s, upstream %s] %s", i, w.clock.Now().Sub(w.ref.hist[0].at), w.up, op)
			if answer != "" {
				line += " → " + answer
			}
			run.trace = append(run.trace, line)
		}
		if len(vs) > 0 {
			run.failAt, run.verdicts, run.logTail = i, vs, w.log.tail(40)
			return run
		}
	}
	return run
}

// exec runs one operation: a request is sent and its answer checked; a
// change is made to the world. answer summarises what hubproxy said.
func (w *modelWorld) exec(op modelOp) (vs []modelVerdict, answer string, err error) {
	w.clock.Advance(op.dt)
	switch op.kind {
	case opFile, opAPI, opTensor, opPass, opStage, opStoreRead:
		start := time.Now()
		defer func() { w.counts["ms in requests while "+w.up.String()] += int(time.Since(start).Milliseconds()) }()
		// Node B has its own breaker, and so its own view of an outage.
		down, up, recovering := w.down, w.upstreamUp, &w.recovering
		if op.kind == opStoreRead {
			down, up, recovering = w.nodeB.down, w.nodeB.upstreamUp, &w.nodeB.recovering
		}
		wasDown := down()
		req := w.request(op, op.repo)
		sent := time.Now()
		ans := w.do(req)
		var vs []modelVerdict
		if op.kind == opStage {
			ans, vs = w.staged(req, ans)
		}
		nv := len(vs)
		vs = append(vs, w.check(req, ans, wasDown)...)
		if len(vs) > nv && !wasDown && (w.up == upOK || w.up == upCDN503) &&
			time.Since(sent) >= w.cfg.MetadataTimeout && !up() {
			// This very request found the healthy upstream too slow (a
			// loaded machine) and hubproxy marked it down: an outage as
			// it sees it, so its outage trust applies. A request answered
			// at once by a breaker opened earlier (by a failing path a
			// client picked, say) is not excused.
			*recovering = true
			w.counts["upstream marked down while up (too slow)"]++
			vs = append(vs[:nv], w.check(req, ans, true)...)
		}
		w.countNewOps(op, ans)
		return vs, describe(req, ans), nil
	case opPair:
		return w.pair(op)
	}
	return nil, "", w.apply(op)
}

// pair sends a stranger's request for the private repo and for the missing
// one: while nothing about them changed within the window, the answers must
// not differ, or the stranger learns that the private repo exists.
func (w *modelWorld) pair(op modelOp) ([]modelVerdict, string, error) {
	down := w.down()
	p := pairOp(op)
	order := [2]int{repoPrivate, repoMissing}
	if (op.caller+op.route)%2 == 1 {
		order[0], order[1] = order[1], order[0]
	}
	// A hung or gone upstream is steady only once hubproxy has marked it
	// down: until then the first request may wait out the probe (and the
	// client give up) while the second is answered by the opened breaker.
	marked := func() bool { return w.up != upHung && w.up != upGone || !w.upstreamUp() }
	markedBefore := marked()
	var vs []modelVerdict
	var ans [2]*modelAnswer
	var desc [2]string
	for i, r := range order {
		req := w.request(p, r)
		ans[i] = w.do(req)
		vs = append(vs, w.check(req, ans[i], down)...)
		desc[i] = modelRepoSpecs[r].id + ": " + describe(req, ans[i])
	}
	// Only in steady states: a breaker closing between the two requests
	// would tell them apart legitimately.
	steady := w.up == upOK && !w.recovering || w.up == upAll503 || w.up == upAll429 ||
		(w.up == upHung || w.up == upGone) && markedBefore && marked()
	stranger := true
	for _, st := range w.ref.window(w.clock.Now(), w.window(true)) {
		s, _ := st.refusal(repoPrivate, modelCallers[op.caller].token, false)
		stranger = stranger && s != 0
	}
	if steady && stranger && pairKey(ans[0]) != pairKey(ans[1]) {
		vs = append(vs, leak("oracle", "a stranger tells a private repo from one that does not exist: %s answered %q, %s answered %q",
			modelRepoSpecs[order[0]].id, pairKey(ans[0]), modelRepoSpecs[order[1]].id, pairKey(ans[1])))
	}
	return vs, desc[0] + "; " + desc[1], nil
}

// describe summarises an answer for a history.
func describe(req *modelReq, a *modelAnswer) string {
	if a.status == 0 {
		return fmt.Sprintf("no answer (%v)", a.err)
	}
	s := strconv.Itoa(a.status)
	if c := a.header.Get("X-Error-Code"); c != "" {
		s += " " + c
	}
	if req.method != "HEAD" && a.status < 300 {
		s += fmt.Sprintf(", %d bytes", len(a.body))
	}
	for _, k := range []string{"X-Repo-Commit", "Etag", "X-Linked-Size", "Content-Range"} {
		if v := a.header.Get(k); v != "" {
			s += fmt.Sprintf(", %s %.16s", k, strings.Trim(v, `"`))
		}
	}
	if a.err != nil {
		s += fmt.Sprintf(", cut short (%v)", a.err)
	}
	return s
}
