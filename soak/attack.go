package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// The attacks of the access review, played around every outage and error
// storm.
//
// On the Hub a gated repo's metadata is public: anyone, anonymous callers
// included, gets its repo info, tree and paths-info, while its files stay
// behind the gate (docs/hub-protocol.md §9). A proxy that takes a 200 on
// metadata for a grant of the files hands them to whoever asked, and an
// outage is when that shows: upstream cannot refuse, so the proxy decides
// from what it remembers. So right before the upstream goes away, refused
// callers (anonymous, a token approved nowhere, a revoked one) read the
// gated repos' metadata, as the Hub lets them, expand= projections
// included; while it is away (refused, blackholed, or answering 503 or 429
// to everything) and right after, they ask for the files: whole, ranges,
// HEADs, tensors, listings, missing paths and branches. The oracle judges
// every answer as any other: a byte, a size, an etag, a commit or an
// EntryNotFound the Hub would not have given that caller is a violation.
//
// The breaker attack: a caller names a pass-through API route that upstream
// answers 500 (the relay plays that upstream, relay.go), to open hubproxy's
// upstream breaker for everyone. The workload sends such POSTs during the
// chaos; the quiet phase sends a burst and then demands that a public file
// no proxy has seen is served (breakerCheck).

// attackers are the callers the gated repos refuse their files: anonymous,
// a token approved nowhere, and bob, whom the chaos revokes now and then.
var attackers = []string{anon, tokCarol, tokBob}

// underAttack runs begin (which takes the upstream away and returns what
// brings it back) with the attack around it: metadata reads right before,
// file reads while it lasts (a.hold) and right after.
func (s *soak) underAttack(ctx context.Context, a action, begin func() (end func())) {
	procs := s.procs.all
	if a.target >= 0 && a.target < len(procs) {
		procs = procs[a.target : a.target+1]
	}
	rng := rand.New(rand.NewPCG(s.seed, uint64(a.at)))
	for _, p := range procs {
		s.probeMeta(rng, p)
	}
	end := begin()
	var done sync.WaitGroup
	stop := make(chan struct{})
	for i, p := range procs {
		prng := rand.New(rand.NewPCG(s.seed, uint64(a.at)+uint64(i)+1))
		done.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(attackPause):
				}
				s.probeFiles(prng, p)
				s.probeMeta(prng, p)
			}
		})
	}
	hold(ctx, a.hold)
	end()
	close(stop)
	done.Wait()
	for _, p := range procs {
		s.probeFiles(rng, p)
	}
}

// gatedRepos are the repos whose files are behind a gate now (the flip
// repo when it is gated).
func (s *soak) gatedRepos() []*repoFix {
	st := s.hist.current()
	var out []*repoFix
	for _, fix := range s.w.repos {
		if st.gated[fix.repo] && !st.private[fix.repo] {
			out = append(out, fix)
		}
	}
	return out
}

// probeMeta reads a gated repo's metadata as each attacker: repo info (all
// of it, its expand=private and expand=gated projections), a revision's
// info, the tree and paths-info.
func (s *soak) probeMeta(rng *rand.Rand, p *proxy) {
	repos := s.gatedRepos()
	if len(repos) == 0 {
		return
	}
	for _, caller := range attackers {
		fix := repos[rng.IntN(len(repos))]
		head := s.hist.current().heads[fix.repo]
		c := s.w.commit(head)
		ops := []*op{
			{kind: opInfo},
			{kind: opInfo, expand: []string{"private"}},
			{kind: opInfo, expand: []string{"gated"}},
			{kind: opInfo, expand: []string{"private", "gated"}},
			{kind: opInfo, rev: head},
			{kind: opTree},
			{kind: opPathsInfo, paths: c.paths},
		}
		for _, i := range rng.Perm(len(ops))[:4] {
			o := ops[i]
			o.caller, o.repo, o.limit = caller, fix.repo, 1<<20
			if o.rev == "" {
				o.rev = "main"
			}
			s.attackOp(o, p)
		}
	}
}

// probeFiles asks for a gated repo's files as each attacker.
func (s *soak) probeFiles(rng *rand.Rand, p *proxy) {
	repos := s.gatedRepos()
	if len(repos) == 0 {
		return
	}
	for _, caller := range attackers {
		fix := repos[rng.IntN(len(repos))]
		rev := "main"
		head := s.hist.current().heads[fix.repo]
		if rng.IntN(2) == 0 {
			rev = head
		}
		c := s.w.commit(head)
		path := c.paths[rng.IntN(len(c.paths))]
		f := c.files[path]
		file := func(k opKind) *op {
			return &op{kind: k, path: path, files: []string{path}, limit: s.w.maxSize + 1<<20}
		}
		ops := []*op{file(opWhole), file(opHead), file(opRange),
			{kind: opMissing, path: "missing/" + randName(rng) + ".bin", limit: 64 << 10},
			{kind: opHead, path: path, rev: noSuchRev, limit: 64 << 10}}
		ops[2].rng = drawRange(rng, f.size())
		if f.key == s.w.corruptKey {
			ops[2].kind = opWhole // see world.corruptKey
		}
		if fix.tensors {
			name := c.names[rng.IntN(len(c.names))]
			t := c.tensors[name]
			ops = append(ops, &op{kind: opTensor, tensor: name, files: []string{t.file}, limit: t.n + 1<<20},
				&op{kind: opListing, files: stFiles(c), limit: 1 << 20})
		}
		for _, i := range rng.Perm(len(ops))[:4] {
			o := ops[i]
			o.caller, o.repo = caller, fix.repo
			if o.rev == "" {
				o.rev = rev
			}
			s.attackOp(o, p)
		}
	}
}

// attackPause is the attacker's pause between rounds: it keeps asking for
// as long as the upstream is away, without spinning on the instant
// refusals of a proxy being restarted.
const attackPause = 100 * time.Millisecond

// attackOp sends one attacker's op and counts it; like a client, it backs
// off after an unavailable answer.
func (s *soak) attackOp(o *op, p *proxy) {
	s.attacks.Add(1)
	if s.exec(o, p).out == outUnavailable {
		time.Sleep(attackPause / 2)
	}
}

// baitBurst is how many breaker-bait POSTs the quiet phase sends each
// proxy, several at a time, before it asks for a file no proxy has seen.
const baitBurst = 24

// breakerCheck sends p a burst of pass-through POSTs that upstream answers
// 500, then asks for a public file no proxy has cached: with the upstream
// healthy it must be served, whatever a caller made upstream answer on a
// route of its choosing.
func (s *soak) breakerCheck(rep *Report, p *proxy) {
	llm := hub.MustRepo(hub.Model, "soak/llm")
	before := p.up.hubRelay.baited.Load()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range baitBurst {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.exec(&op{kind: opBait, caller: []string{anon, tokCarol}[i%2], repo: llm, rev: "main", limit: 1 << 20}, p)
		})
	}
	wg.Wait()
	reached := p.up.hubRelay.baited.Load() - before
	id := s.pushCommit()
	moving := hub.MustRepo(hub.Model, "soak/moving")
	f := s.w.commit(id).files["data.bin"]
	start := time.Now()
	j := s.exec(&op{kind: opWhole, caller: anon, repo: moving, rev: id, path: "data.bin", files: []string{"data.bin"},
		limit: f.size() + 1}, p)
	line := fmt.Sprintf("%s: %d pass-through POSTs upstream answers 500 (%d reached it); a public file no proxy had, right after: %v in %s",
		p.name, baitBurst, reached, j.out, time.Since(start).Round(time.Millisecond))
	if j.out != outServed {
		s.fail("breaker", fmt.Sprintf("%s: after %d pass-through POSTs a caller made upstream answer 500, a public file no proxy had was not served with the upstream healthy: %v %s %s",
			p.name, baitBurst, j.out, j.class, j.detail))
	}
	rep.Breaker = append(rep.Breaker, line)
}
