package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// upstream is one proxy's own fake hub and the relays in front of its hub
// and CDN servers. Every hub holds the same repos and goes through the same
// history; a hub per proxy lets the byte ledger and the fault counts name
// the proxy each upstream byte went to.
type upstream struct {
	hub      *hubtest.Hub
	hubRelay *relay
	cdnRelay *relay
	// foreign relays the foreign host a RedirectForeign fault sends the
	// proxy to: only so that the driver can close those connections too
	// when it measures a proxy at rest. Outages leave it alone.
	foreign *relay

	mu   sync.Mutex // guards the fields below
	down int        // outages in force; the relays are up at 0
	// plan is the faults the fault plan drew last; storms in force (and
	// whether the last one answers 429) override it: the hub answers
	// every request 503 (or 429), as the Hub does in an outage.
	plan     hubtest.Faults
	storms   int
	storm429 bool
}

// setFaults arms f at the hub, under a storm in force.
func (u *upstream) setFaults(f hubtest.Faults) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.plan = f
	u.applyLocked()
}

func (u *upstream) applyLocked() {
	f := u.plan
	if u.storms > 0 {
		every := hubtest.Fault{N: 1 << 40, Target: hubtest.TargetAny}
		if u.storm429 {
			f.TooManyRequests = every
		} else {
			f.Status5xx = every
		}
	}
	u.hub.SetFaults(f)
}

// storm makes the hub answer every request 503 (429 with tooMany) until
// the returned func is called. Its CDN keeps serving, as the Hub's does.
func (u *upstream) storm(tooMany bool) (end func()) {
	u.mu.Lock()
	u.storms++
	u.storm429 = tooMany
	u.applyLocked()
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.storms--
		u.applyLocked()
	}
}

// outage takes the upstream down in mode until the returned func is called.
func (u *upstream) outage(m relayMode) (restore func()) {
	u.mu.Lock()
	u.down++
	u.hubRelay.set(m)
	u.cdnRelay.set(m)
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.down--; u.down == 0 {
			u.hubRelay.set(relayUp)
			u.cdnRelay.set(relayUp)
		}
	}
}

// restartable is a component the chaos kills with SIGKILL and restarts on
// the same data: the crashy hubproxy processes, and the shared store (a
// MinIO process on its data directory, store.go). Its kills and restarts
// are counted apart from the proxies'.
type restartable interface {
	Name() string
	// Kill stops it abruptly and reports what the byte ledger must know.
	Kill() error
	// Restart starts it again and waits until it serves.
	Restart() error
}

// Name, Kill and Restart make a crashy proxy restartable.
func (p *proxy) Name() string { return p.name }

func (p *proxy) Kill() error {
	p.bankStoreFigures()
	if p.kill() == nil {
		return fmt.Errorf("soak: %s was not running", p.name)
	}
	// Whatever was partial is found on disk now, in-flight fills included
	// (their data file is created before the first byte arrives).
	p.ledger.killed(partialETags(p.dir))
	return nil
}

func (p *proxy) Restart() error {
	_, err := p.start()
	return err
}

// partialETags lists the blobs a cache holds partial files of.
func partialETags(dir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dir, ".hubproxy", "partial"))
	seen := map[string]bool{}
	var out []string
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".json")
		if i := strings.LastIndex(name, "--"); i >= 0 && !seen[name[i+2:]] {
			seen[name[i+2:]] = true
			out = append(out, name[i+2:])
		}
	}
	return out
}

// runChaos plays acts from start until they run out or ctx ends, and
// returns once every action has finished and been undone.
func (s *soak) runChaos(ctx context.Context, start time.Time, acts []action) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, a := range acts {
		t := time.NewTimer(time.Until(start.Add(a.at)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.events.add("chaos", a.String())
		switch a.kind {
		case actKill:
			wg.Go(func() { s.killRestart(a) })
		case actDiskFill:
			wg.Go(func() { s.fillDisk(ctx, a) })
		case actOutage:
			wg.Go(func() { s.outage(ctx, a) })
		case actStorm:
			wg.Go(func() { s.storm(ctx, a) })
		case actRevoke, actGrant:
			s.setRevoked(a.kind == actRevoke)
		case actAccess:
			s.setAccess(a.gated, a.priv)
		case actCommit:
			s.pushCommit()
		case actExpireURLs:
			for _, u := range s.ups {
				u.hub.ExpireURLs()
			}
		case actStoreKill:
			wg.Go(func() { s.restartStore(a) })
		case actStoreOutage:
			wg.Go(func() { s.storeOutage(ctx, a) })
		case actTamper:
			wg.Go(func() { s.tamper(ctx, a) })
		}
	}
}

// hold waits for d, or less if ctx ends.
func hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (s *soak) killRestart(a action) {
	p := s.procs.all[a.target]
	if a.claimant {
		if q := s.claimHolder(8 * time.Second); q != nil {
			p = q
			s.claimantKills.Add(1)
			s.events.add("chaos", p.name+" holds a chunk claim: killing it")
		}
	}
	p.chaosMu.Lock()
	defer p.chaosMu.Unlock()
	if s.cycle(p, a.hold) {
		s.kills.Add(1)
	}
}

// cycle kills r, waits hold and restarts it; it reports whether the kill
// happened.
func (s *soak) cycle(r restartable, hold time.Duration) bool {
	if err := r.Kill(); err != nil {
		s.fail("chaos", fmt.Sprintf("kill %s: %v", r.Name(), err))
		return false
	}
	s.events.add("chaos", r.Name()+" killed")
	time.Sleep(hold)
	if err := r.Restart(); err != nil {
		s.fail("chaos", fmt.Sprintf("restart %s after a kill: %v", r.Name(), err))
	}
	s.events.add("chaos", r.Name()+" restarted")
	return true
}

// fillDisk fills a proxy's tmpfs for a while, all but a little, as a
// neighbour writing to the same volume would: whatever the proxy frees by
// evicting is taken again at once, so its writes really fail with ENOSPC
// rather than just pushing eviction along.
func (s *soak) fillDisk(ctx context.Context, a action) {
	p := s.procs.all[a.target]
	p.diskMu.Lock()
	defer p.diskMu.Unlock()
	const leave = 128 << 10
	free := func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(p.mount, &st); err != nil {
			return 0
		}
		return int64(st.Bavail) * st.Bsize
	}
	p.ledger.diskFull(time.Now())
	defer func() { p.ledger.diskFree(time.Now()) }()
	name := filepath.Join(p.mount, "filler")
	f, err := os.Create(name)
	if err != nil {
		s.fail("chaos", fmt.Sprintf("disk fill: %v", err))
		return
	}
	defer func() {
		f.Close()
		if err := os.Remove(name); err != nil {
			s.fail("chaos", fmt.Sprintf("removing the filler: %v", err))
		}
	}()
	s.diskFills.Add(1)
	var size int64
	deadline := time.Now().Add(a.hold)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if n := free() - leave; n > 0 {
			if err := syscall.Fallocate(int(f.Fd()), 0, size, n); err == nil {
				size += n
			}
		}
		hold(ctx, 100*time.Millisecond)
	}
}

// outage makes one proxy's upstream, or every one, unreachable for a
// while, under attack (attack.go).
func (s *soak) outage(ctx context.Context, a action) {
	s.underAttack(ctx, a, func() func() {
		var restores []func()
		for i, u := range s.ups {
			if a.target < 0 || a.target == i {
				restores = append(restores, u.outage(a.mode))
			}
		}
		s.outages.Add(1)
		return func() {
			for _, r := range restores {
				r()
			}
		}
	})
}

// storm makes one proxy's hub, or every one, answer everything 503 or 429
// for a while, under attack.
func (s *soak) storm(ctx context.Context, a action) {
	s.underAttack(ctx, a, func() func() {
		var ends []func()
		for i, u := range s.ups {
			if a.target < 0 || a.target == i {
				ends = append(ends, u.storm(a.tooMany))
			}
		}
		s.storms.Add(1)
		return func() {
			for _, e := range ends {
				e()
			}
		}
	})
}

// setRevoked revokes bob's token at every hub, or grants it back.
func (s *soak) setRevoked(revoke bool) {
	s.hist.change(func() func(*hubState) {
		for _, u := range s.ups {
			if revoke {
				u.hub.RevokeToken(tokBob)
			} else {
				u.hub.GrantToken(tokBob)
			}
		}
		return func(st *hubState) { st.revoked[tokBob] = revoke }
	})
}

// setAccess makes the flip repo public, gated or private at every hub.
func (s *soak) setAccess(gated, private bool) {
	flip := hub.MustRepo(hub.Model, "soak/flip")
	s.hist.change(func() func(*hubState) {
		for _, u := range s.ups {
			u.hub.SetAccess(flip, gated, private)
		}
		return func(st *hubState) { st.gated[flip], st.private[flip] = gated, private }
	})
}

// pushCommit makes a new commit on the moving repo's main at every hub;
// the hubs must agree on its id (their histories are the same).
func (s *soak) pushCommit() string {
	moving := hub.MustRepo(hub.Model, "soak/moving")
	var id string
	s.hist.change(func() func(*hubState) {
		files := s.w.nextMovingFiles()
		for i, u := range s.ups {
			got := u.hub.Commit(moving, "main", files)
			if i == 0 {
				id = got
			} else if got != id {
				s.fail("setup", fmt.Sprintf("hubs disagree on a commit: %s and %s", id, got))
			}
		}
		if err := s.w.addCommit(s.ups[0].hub, moving, id, files); err != nil {
			s.fail("setup", err.Error())
		}
		return func(st *hubState) { st.heads[moving] = id }
	})
	return id
}
