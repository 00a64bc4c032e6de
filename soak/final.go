package soak

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// quietPhase ends the run: it undoes the chaos, waits until every proxy
// trusts its upstream again, stops the clients and then demands that
// everything works: every file to every caller, one fill for a herd, no
// leaks, a clean shutdown, an intact cache, and the byte bound.
func (s *soak) quietPhase(rep *Report, stopWork func(), clients *sync.WaitGroup) {
	cur := s.hist.current()
	if cur.revoked[tokBob] {
		s.setRevoked(false)
	}
	if flip := hub.MustRepo(hub.Model, "soak/flip"); cur.gated[flip] || cur.private[flip] {
		s.setAccess(false, false)
	}
	// The clients keep going meanwhile: their requests are what lets a
	// proxy's probe find the upstream again.
	for _, p := range s.procs.all {
		if err := waitUpstreamUp(p, 150*time.Second); err != nil {
			s.fail("liveness", err.Error())
		}
		if s.store != nil {
			if err := waitStoreUp(p, 90*time.Second); err != nil {
				s.fail("liveness", err.Error())
			}
		}
	}
	// Past every window, so no decision or ref from the chaos is reused.
	time.Sleep(accessTTL + revisionTTL + lateness)
	stopWork()
	clients.Wait()
	s.events.add("phase", "clients stopped; sweeping")

	for _, p := range s.procs.all {
		s.sweep(p)
		s.breakerCheck(rep, p)
		s.herd(rep, p)
	}
	all := s.procs.all
	if s.store != nil {
		s.slowOwner(rep)
		if s.cfg.NoTmpfs {
			rep.Phases = append(rep.Phases, "small disk: off (-no-tmpfs: no disk is small)")
		} else {
			s.smallDisk(rep)
		}
		s.coldRead(rep)
		all = s.everyProxy()
	}
	rep.After = s.quiesced(s.procs.all[0])
	rep.Leaks = s.checkLeaks(rep.Baseline, rep.After)
	for _, p := range all {
		p.bankStoreFigures()
		if err := p.stop(); err != nil {
			s.fail("shutdown", err.Error())
		}
	}
	var sh *sharedTerms
	if s.store != nil {
		s.checkStoreAfter(rep)
		sh = clusterTerms(all)
		rep.Store.cluster = s.checkCluster(all)
		rep.Store.other = sh.other
	}
	for _, p := range all {
		// Only CorruptBytes sends wrong content the proxy cannot spot
		// before the hash; every other lie (a wrong or ignored range, a
		// cut) must be caught as it arrives, so no other blob may ever
		// fail its hash.
		for etag, n := range p.sink.mismatches() {
			if b := s.w.blob(etag); b == nil || b.key != s.w.corruptKey {
				s.fail("wrong-bytes", fmt.Sprintf("%s assembled content for blob %s that failed its hash %d times; only %s is ever corrupted upstream", p.name, etag, n, s.w.corruptKey))
			}
		}
		s.checkCache(rep, p)
		bad, total := p.ledger.check(p.sink, sh)
		rep.Ledger = append(rep.Ledger, ledgerLine{proxy: p.name, total: total, sent: p.up.hub.Counters().BodyBytes})
		for _, e := range bad {
			s.fail("refetch", fmt.Sprintf("%s: %s: %d bytes fetched again, %d of them explained (credited: %s):%s",
				p.name, e.key, e.refetch, e.explained, e.grantedLine(), e.detail))
		}
		if c := p.up.hub.Counters(); c.AuthSeenByCDN != 0 || c.AuthSeenByForeign != 0 {
			s.fail("credentials", fmt.Sprintf("%s sent credentials to the CDN %d times and to a foreign host %d times", p.name, c.AuthSeenByCDN, c.AuthSeenByForeign))
		}
	}
}

// waitUpstreamUp waits until p's metrics say its upstream is up.
func waitUpstreamUp(p *proxy, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if addr, _ := p.address(); addr != "" {
			if m, err := getText("http://" + addr + "/metrics"); err == nil && strings.Contains(m, "\nhubproxy_upstream_up 1\n") {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s still considers its upstream down %s after the chaos ended", p.name, limit)
}

func getText(u string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// sweep asks p for everything as every caller, with the upstream healthy:
// every answer must now be right and available.
func (s *soak) sweep(p *proxy) {
	for _, fix := range s.w.repos {
		c := s.w.commit(s.hist.current().heads[fix.repo])
		for _, caller := range []string{anon, tokAlice, tokBob, tokCarol} {
			ops := []*op{
				{kind: opInfo, limit: 1 << 20},
				{kind: opInfo, expand: []string{"private", "gated"}, limit: 1 << 20},
				{kind: opTree, limit: 1 << 20},
				{kind: opPathsInfo, paths: c.paths, limit: 1 << 20},
			}
			if fix.tensors {
				ops = append(ops, &op{kind: opListing, limit: 1 << 20})
			}
			for _, path := range c.paths {
				ops = append(ops, &op{kind: opWhole, path: path, files: []string{path}, limit: s.w.maxSize + 1<<20})
			}
			for _, o := range ops {
				o.caller, o.repo, o.rev = caller, fix.repo, "main"
				if j := s.exec(o, p); j.out == outUnavailable {
					s.fail("liveness", fmt.Sprintf("%s on %s with the upstream healthy: unavailable (%s)", o, p.name, j.class))
				}
				if s.stats.violations() > 50 {
					return
				}
			}
		}
	}
}

// herd sends eight clients at once after a file no proxy has seen: the hub
// must send it once, and not again for a warm read.
func (s *soak) herd(rep *Report, p *proxy) {
	id := s.pushCommit()
	moving := hub.MustRepo(hub.Model, "soak/moving")
	f := s.w.commit(id).files["data.bin"]
	before := p.ledger.completeBytes(f.etag)
	read := func(caller string) judgement {
		return s.exec(&op{kind: opWhole, caller: caller, repo: moving, rev: id, path: "data.bin",
			files: []string{"data.bin"}, limit: f.size() + 1}, p)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if j := read([]string{anon, tokAlice}[i%2]); j.out != outServed {
				s.fail("herd", fmt.Sprintf("%s: a herd reader of a fresh file got %v %s %s", p.name, j.out, j.class, j.detail))
			}
		})
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // the hub records a request once its handler returns
	cold := p.ledger.completeBytes(f.etag) - before
	if j := read(tokAlice); j.out != outServed {
		s.fail("herd", fmt.Sprintf("%s: a warm read got %v %s", p.name, j.out, j.detail))
	}
	time.Sleep(300 * time.Millisecond)
	warm := p.ledger.completeBytes(f.etag) - before - cold
	line := fmt.Sprintf("%s: 8 cold readers of %d bytes: %d from upstream; a warm read: %d", p.name, f.size(), cold, warm)
	if cold > f.size() || warm != 0 {
		s.fail("refetch", fmt.Sprintf("%s: 8 concurrent readers of a %d-byte file cost %d upstream bytes, a warm read %d more", p.name, f.size(), cold, warm))
	}
	if s.store != nil {
		// Every other proxy reads it from the store: none from upstream.
		for _, q := range s.procs.all {
			if q == p {
				continue
			}
			before := q.ledger.completeBytes(f.etag)
			if j := s.exec(&op{kind: opWhole, caller: tokAlice, repo: moving, rev: id, path: "data.bin",
				files: []string{"data.bin"}, limit: f.size() + 1}, q); j.out != outServed {
				s.fail("herd", fmt.Sprintf("%s: reading a file %s just fetched got %v %s %s", q.name, p.name, j.out, j.class, j.detail))
			}
			time.Sleep(300 * time.Millisecond)
			got := q.ledger.completeBytes(f.etag) - before
			line += fmt.Sprintf("; %s then: %d", q.name, got)
			if got != 0 {
				s.fail("refetch", fmt.Sprintf("%s fetched %d bytes upstream of a file %s had just put in the shared store", q.name, got, p.name))
			}
		}
	}
	rep.Herd = append(rep.Herd, line)
}

// quiesced measures p at rest: clients paused, their connections and the
// proxy's upstream connections closed, a moment to settle; goroutines and
// descriptors are the least of three looks.
func (s *soak) quiesced(p *proxy) procStats {
	s.gate.pause()
	defer s.gate.resume()
	s.http.CloseIdleConnections()
	p.up.hubRelay.cut(true)
	p.up.cdnRelay.cut(true)
	p.up.foreign.cut(true)
	if s.store != nil {
		s.store.relay.cut(true)
	}
	time.Sleep(1500 * time.Millisecond)
	var best procStats
	for i := range 3 {
		st := s.measure(p)
		if i == 0 || st.Goroutines < best.Goroutines {
			best.Goroutines, best.profile = st.Goroutines, st.profile
		}
		if i == 0 || st.FDs < best.FDs {
			best.FDs, best.FDKinds = st.FDs, st.FDKinds
		}
		best.RSS, best.PeakRSS, best.Threads = st.RSS, st.PeakRSS, st.Threads
		time.Sleep(500 * time.Millisecond)
	}
	return best
}

func (s *soak) measure(p *proxy) procStats {
	inc := p.current()
	if inc == nil {
		return procStats{}
	}
	st, err := readProcStats(inc.pid, inc.admin, p.dir)
	if err != nil {
		s.fail("measure", fmt.Sprintf("%s: %v", p.name, err))
	}
	return st
}

// Leak bounds, at rest, after the run against after the warm-up. The cache
// keeps up to 256 idle blobs open and evicted files are deleted by a
// janitor, so blob and cache-file descriptors come and go; everything else
// (sockets, pipes, other files) and the goroutines must be back. Memory is
// the resident set at rest (VmRSS), which may sit a little above the
// baseline after ten minutes of churn (the Go runtime keeps freed heap a
// while), but not grow with it: measured 33.7 -> 37.1 MiB over the CI run,
// and no hubproxy of a ten-minute run peaked above 44 MiB.
const (
	leakGoroutines = 5
	leakFDs        = 2
	leakRSS        = 32 << 20
)

// checkLeaks compares the steady proxy at rest after the run with the
// baseline, and returns how many resources leaked.
func (s *soak) checkLeaks(base, after procStats) int {
	n := 0
	other := func(st procStats) int { return st.FDs - st.FDKinds["blob"] - st.FDKinds["cache"] }
	if after.Goroutines > base.Goroutines+leakGoroutines {
		n++
		s.fail("leak", fmt.Sprintf("goroutines: %d at rest after the run, %d after the warm-up; the profile now:\n%s",
			after.Goroutines, base.Goroutines, after.profile))
	}
	if other(after) > other(base)+leakFDs || after.FDKinds["deleted"] > 0 {
		n++
		s.fail("leak", fmt.Sprintf("file descriptors: %v at rest after the run, %v after the warm-up", after.FDKinds, base.FDKinds))
	}
	if after.RSS > base.RSS+leakRSS {
		n++
		s.fail("leak", fmt.Sprintf("RSS %s at rest after the run, %s after the warm-up", mib(after.RSS), mib(base.RSS)))
	}
	return n
}
