package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// storeLine is what the report says of the shared store.
type storeLine struct {
	kills, outages         int64
	claimantKills          int64
	tampers, tampersOnDisk int
	tampersSkipped         int
	repaired               int
	figs                   storeFigures
	chunks                 int
	bytes                  int64
	claimsLeft             int
	cold                   string
	cluster                clusterLine
	other                  map[string]int
}

// waitStoreUp waits until p says the shared store answers: asking /readyz
// makes a proxy whose breaker is open probe the store, so one that has no
// store traffic of its own still finds it back.
func waitStoreUp(p *proxy, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if addr, _ := p.address(); addr != "" {
			if rd, err := getText("http://" + addr + "/readyz"); err == nil && strings.Contains(rd, `"store":"up"`) {
				if m, err := getText("http://" + addr + "/metrics"); err == nil && strings.Contains(m, "\nhubproxy_store_up 1\n") {
					return nil
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s still reports the shared store down %s after the chaos ended", p.name, limit)
}

// coldRead starts a proxy on an empty disk and reads every file the hub has
// ever had through it, whole: what a node joining the cluster does. Every
// chunk the store holds with the hub's bytes must come from the store, not
// from upstream; chunks the store holds wrong (tampered with, or put from an
// upstream answer a fault corrupted) must be caught, never served, and
// repaired; and afterwards the store must hold the hub's bytes only.
func (s *soak) coldRead(rep *Report) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before, err := s.scanStore(ctx)
	if err != nil {
		s.fail("store", fmt.Sprintf("scanning the store before the cold read: %v", err))
		return
	}
	p := s.cold
	if _, err := p.start(); err != nil {
		s.fail("cold", fmt.Sprintf("starting a proxy on an empty disk: %v", err))
		return
	}
	s.events.add("proxy", fmt.Sprintf("%s started (pid %d)", p.name, p.current().pid))
	var files int
	var bytes int64
	for _, b := range s.w.allBlobs() {
		repo, commit, path := s.w.where(b.etag)
		if commit == "" {
			continue
		}
		files++
		bytes += b.size()
		o := &op{kind: opWhole, caller: tokAlice, repo: repo, rev: commit, path: path, files: []string{path}, limit: b.size() + 1}
		// A file whose stored chunks were wrong may fail its hash once,
		// when they came from a corrupted upstream answer (then no chunk
		// digest can tell): the proxy drops them and the next read is
		// right. Anything else must be right the first time.
		tries := 1
		if before.badETags[b.etag] || b.key == s.w.corruptKey {
			tries = 4
		}
		for i := range tries {
			j := s.exec(o, p)
			if j.out == outServed {
				break
			}
			if i == tries-1 {
				s.fail("cold", fmt.Sprintf("%s on an empty disk, the upstream and the store healthy: %v %s %s", o, j.out, j.class, j.detail))
			}
			time.Sleep(time.Second) // the drop runs in the background
		}
	}
	time.Sleep(300 * time.Millisecond) // the hub records a request once its handler returns
	// Chunks the store held right must not have been fetched upstream,
	// but for files the proxy dropped from the store when they failed
	// verification (a chunk put from a corrupted upstream answer): those
	// are fetched anew, right chunks too.
	forgot := p.sink.storeEvents().forgets
	var fetched, upstream int64
	p.ledger.mu.Lock()
	for etag, spans := range before.goodChunks {
		if forgot[etag] > 0 {
			continue
		}
		c := p.ledger.cover[etag]
		for _, sp := range spans {
			for blk := sp[0] / ledgerBlock; blk*ledgerBlock < sp[1]; blk++ {
				fetched += c[blk]
			}
		}
	}
	for _, n := range p.ledger.completeB {
		upstream += n
	}
	p.ledger.mu.Unlock()
	if fetched > 0 {
		s.fail("refetch", fmt.Sprintf("cold: a proxy on an empty disk fetched %d bytes upstream of chunks the store held with the hub's bytes", fetched))
	}
	rep.Store.cold = fmt.Sprintf("%d files (%s) read whole on an empty disk: %s from upstream, for the %d chunks the store held wrong or unreadable (%d) and what it did not hold; %d of %d stored chunks right before",
		files, mib(bytes), mib(upstream), len(before.wrong)+len(before.unreadable), len(before.wrong)+len(before.unreadable), before.good, before.chunks)
}

// where names a commit and path a blob can be read at.
func (w *world) where(etag string) (hub.Repo, string, string) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, repo := range w.repos {
		for _, id := range w.order[repo.repo] {
			c := w.commits[id]
			for _, path := range c.paths {
				if c.files[path].etag == etag {
					return repo.repo, id, path
				}
			}
		}
	}
	return hub.Repo{}, "", ""
}

// checkStoreAfter scans the store once every proxy has stopped: it must
// hold the hub's bytes only, every tampered chunk repaired, and no claim but
// those of proxies killed with SIGKILL (which could not release theirs;
// they are what the lease is for). A proxy stopped cleanly releases every
// claim it held.
func (s *soak) checkStoreAfter(rep *Report) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc, err := s.scanStore(ctx)
	if err != nil {
		s.fail("store", fmt.Sprintf("scanning the store after the run: %v", err))
		return
	}
	rep.Store.chunks, rep.Store.bytes, rep.Store.claimsLeft = sc.chunks, sc.bytes, len(sc.claims)
	for _, k := range sc.wrong {
		s.fail("store", fmt.Sprintf("the store holds %s, whose bytes are not the hub's for that etag", k))
	}
	for _, k := range sc.unreadable {
		s.fail("store", fmt.Sprintf("the store holds %s, which it cannot read back", k))
	}
	for _, k := range sc.other {
		// The store's probe objects, and the object each node writes to
		// read the store's clock off its modification time
		// (internal/sharedfill's storeclock.go).
		if !strings.Contains(k, "/probe") && k != storeClockKey {
			s.fail("store", fmt.Sprintf("the store holds %s, which is neither a chunk nor a claim", k))
		}
	}
	killed := map[int]bool{}
	for _, p := range s.everyProxy() {
		p.mu.Lock()
		for _, pid := range p.killed {
			killed[pid] = true
		}
		p.mu.Unlock()
	}
	for _, c := range sc.claims {
		if !killed[ownerPID(c.owner)] {
			s.fail("store", fmt.Sprintf("claim %s (owner %q, last renewed %s) outlived its owner's clean stop: a claim not released", c.key, c.owner, c.lastModified.Format(clock)))
		}
	}
	rep.Store.repaired = s.checkTampered(ctx)
}

// storeRows renders the shared store's figures.
func (r *Report) storeRows(row func(string, any)) {
	st := r.Store
	f := st.figs
	row("shared store restarts survived (SIGKILL, restart on its data)", st.kills)
	row("shared store outages (refused or blackholed)", st.outages)
	row("stored chunks tampered with (same size, other bytes)", fmt.Sprintf("%d (%d in MinIO's files on disk, %d through the S3 API; %d skipped, nothing to tamper with); %d repaired (one served or promoted fails the run)",
		st.tampers, st.tampersOnDisk, st.tampers-st.tampersOnDisk, st.tampersSkipped, st.repaired))
	row("chunk claims (all proxies)", fmt.Sprintf("%.0f won (fetched upstream for the cluster), %.0f waited (another node fetched), %.0f taken over from a silent owner; %d proxies killed while holding one",
		f.Won, f.Waited, f.TakenOver, st.claimantKills))
	row("shared store traffic", fmt.Sprintf("%s read, %s written, %.0f requests, %.0f failed", mib(int64(f.Read)), mib(int64(f.Written)), f.Requests, f.Errors))
	row("shared store at the end", fmt.Sprintf("%d chunks (%s), each checked against the hub's bytes; %d claims left (one of a live proxy fails the run)", st.chunks, mib(st.bytes), st.claimsLeft))
	c := st.cluster
	t := c.total
	row("upstream bytes, cluster", fmt.Sprintf("%s in complete answers while the store was on (%s of distinct blocks), %s around it while a proxy's store was off; "+
		"%s fetched again (one fetch per block across the proxies), %s of it explained, block by block (%d store events, %d files dropped after failing verification; credited: %s)",
		mib(c.through), mib(c.firsts), mib(c.around), mib(t.refetch), mib(t.explained), c.events, c.forgets, t.grantedLine()))
	row("cold node", st.cold)
	if len(st.other) > 0 {
		row("shared-store log lines not understood", fmt.Sprint(st.other))
	}
}
