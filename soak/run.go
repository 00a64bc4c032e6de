package soak

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// soak is one run.
type soak struct {
	cfg     Config
	seed    uint64
	workDir string
	ups     []*upstream
	w       *world
	hist    *history
	oracle  *oracle
	gen     *generator
	gate    *gate
	procs   *procSet
	http    *http.Client
	events  *eventLog
	stats   *stats
	mounts  []string
	// The shared store, when the run has one (nil with -no-store): the
	// proxies share chunks through it, and the chaos restarts it, cuts it
	// off and tampers with what it holds. cold is a proxy started only
	// after the chaos, on an empty disk, to read everything through the
	// store (final.go).
	store   *objectStore
	tampers *tamperLog
	cold    *proxy
	// small is a proxy whose disk is smaller than the largest file it is
	// asked for, started only for the small-disk phase (phases.go); nil
	// without a store.
	small *proxy

	kills, diskFills, outages atomic.Int64
	storms, attacks           atomic.Int64
	storeKills, storeOutages  atomic.Int64
	claimantKills             atomic.Int64
	peakRSS                   atomic.Int64
}

// tmpfsSize is each proxy's disk: room for the cache budget (6 MiB), its
// free-space floor (2 MiB) and the blobs a full budget still lets in
// flight, and small enough that the chaos can fill it in a moment.
const tmpfsSize = "24m"

// smallTmpfsSize is the small-disk node's disk: far below bigSize, so its
// reads of that file bypass the cache.
const smallTmpfsSize = "64m"

// ErrFailed is returned when the run found a violation.
var ErrFailed = errors.New("soak: failed")

// Run runs one soak and reports on it; it returns ErrFailed (with the
// report written) if anything was wrong.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &soak{cfg: cfg, seed: cfg.Seed, gate: newGate(), http: newHTTPClient(), stats: newStats()}
	if s.seed == 0 {
		s.seed = uint64(time.Now().UnixNano())
	}
	s.events = newEventLog(time.Now())
	store := "one shared MinIO store"
	if cfg.NoStore {
		store = "no shared store"
	}
	fmt.Fprintf(cfg.Out, "soak: seed %d, %s of chaos, %d clients, 1 steady + %d crashy hubproxy, %s\n",
		s.seed, cfg.Duration, cfg.Clients, cfg.Crashy, store)
	defer s.cleanup()
	if err := s.setup(); err != nil {
		return nil, err
	}
	rep := s.run(ctx)
	rep.write(cfg.Out)
	if cfg.ReportPath != "" {
		if err := os.WriteFile(cfg.ReportPath, []byte(rep.markdown()), 0o644); err != nil {
			return rep, err
		}
	}
	if rep.Failed {
		s.cfg.WorkDir = s.workDir // keep it: the logs are there
		return rep, ErrFailed
	}
	return rep, nil
}

// setup builds the hubs, the world, the relays and the proxies.
func (s *soak) setup() error {
	dir := s.cfg.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "hubproxy-soak-")
		if err != nil {
			return err
		}
		dir = d
	}
	s.workDir = dir
	n := 1 + s.cfg.Crashy
	if !s.cfg.NoStore {
		st, err := startStore(s.cfg.MinIO, dir)
		if err != nil {
			return err
		}
		s.store, s.tampers = st, newTamperLog(s.seed)
		n += 2 // the cold and the small-disk node's hubs: they go through the same history
	}
	var hubs []*hubtest.Hub
	for range n {
		h, err := hubtest.New(hubtest.Options{})
		if err != nil {
			return err
		}
		hubs = append(hubs, h)
		s.ups = append(s.ups, &upstream{hub: h})
	}
	w, err := newWorld(hubs, s.seed, bigSize)
	if err != nil {
		return err
	}
	s.w = w
	st := &hubState{gated: map[hub.Repo]bool{}, private: map[hub.Repo]bool{}, approved: map[hub.Repo]map[string]bool{},
		revoked: map[string]bool{}, heads: map[hub.Repo]string{}}
	for _, fix := range w.allRepos() {
		st.gated[fix.repo], st.private[fix.repo] = fix.gated, fix.private
		st.approved[fix.repo] = map[string]bool{}
		for _, t := range fix.approved {
			st.approved[fix.repo][t] = true
		}
		st.heads[fix.repo] = w.first[fix.repo]
	}
	s.hist = newHistory(st, time.Now())
	s.oracle = &oracle{w: w, hist: s.hist}
	s.gen = &generator{w: w, hist: s.hist}
	s.procs = &procSet{}
	for i, u := range s.ups {
		if i > s.cfg.Crashy {
			// The cold node and the small-disk one: wired now, started
			// after the chaos.
			var err error
			if s.cold == nil {
				s.cold, err = s.newProxy("cold", false, u, tmpfsSize)
			} else {
				s.small, err = s.newProxy("small", false, u, smallTmpfsSize)
			}
			if err != nil {
				return err
			}
			continue
		}
		p, err := s.newProxy(fmt.Sprintf("p%d", i), i > 0, u, tmpfsSize)
		if err != nil {
			return err
		}
		s.procs.all = append(s.procs.all, p)
		if _, err := p.start(); err != nil {
			return err
		}
		s.events.add("proxy", fmt.Sprintf("%s started (pid %d)", p.name, p.current().pid))
	}
	return nil
}

// newProxy wires a proxy: its relays, ledger, disk (a tmpfs of disk bytes)
// and log; it is not started.
func (s *soak) newProxy(name string, crashy bool, u *upstream, disk string) (*proxy, error) {
	hubAddr, cdnAddr := hostOf(u.hub.URL), hostOf(u.hub.CDNURL)
	l := newLedger(s.w, u.hub, "", "")
	l.shared, l.hist = s.store != nil, s.hist
	var err error
	if u.hubRelay, err = newRelay(name+"-hub", hubAddr, l.relayLost); err != nil {
		return nil, err
	}
	if u.cdnRelay, err = newRelay(name+"-cdn", cdnAddr, l.relayLost); err != nil {
		return nil, err
	}
	if u.foreign, err = newRelay(name+"-foreign", hostOf(u.hub.ForeignURL), nil); err != nil {
		return nil, err
	}
	l.hubHost, l.cdnHost = u.hubRelay.Host(), u.cdnRelay.Host()
	// Presigned URLs and foreign redirects point through the relays, so an
	// outage reaches the CDN too. Set before any request, so no handler
	// reads them concurrently.
	u.hub.CDNURL = u.cdnRelay.URL()
	u.hub.ForeignURL = u.foreign.URL()
	u.hub.SetRequestObserver(l.observe)

	mount := filepath.Join(s.workDir, name)
	if err := os.MkdirAll(mount, 0o755); err != nil {
		return nil, err
	}
	if !s.cfg.NoTmpfs {
		if err := syscall.Mount("tmpfs", mount, "tmpfs", 0, "size="+disk); err != nil {
			return nil, fmt.Errorf("soak: mounting a %s tmpfs for %s's cache (needs root; -no-tmpfs runs without, and without the disk-fill chaos): %w", disk, name, err)
		}
		s.mounts = append(s.mounts, mount)
	}
	sink, err := newLogSink(filepath.Join(s.workDir, name+".log"))
	if err != nil {
		return nil, err
	}
	p := &proxy{name: name, crashy: crashy, bin: s.cfg.Bin, mount: mount, dir: filepath.Join(mount, "cache"),
		sink: sink, ledger: l, up: u}
	storeURL := ""
	if s.store != nil {
		storeURL, p.env = s.store.URL(), s.store.env()
	}
	p.args = proxyArgs(p.dir, u.hubRelay.URL(), "127.0.0.1:0", storeURL)
	p.exited = func(p *proxy, inc *incarnation) {
		s.fail("crash", fmt.Sprintf("%s (pid %d) exited by itself: %v; last lines:\n    %s", p.name, inc.pid, inc.exitErr(),
			joinLines(p.sink.tail(20))))
	}
	return p, nil
}

// everyProxy is the serving proxies, then the cold and the small-disk node
// if they were started (with a store, after the chaos).
func (s *soak) everyProxy() []*proxy {
	all := append([]*proxy(nil), s.procs.all...)
	for _, p := range []*proxy{s.cold, s.small} {
		if p != nil && p.started() {
			all = append(all, p)
		}
	}
	return all
}

func hostOf(u string) string { return u[len("http://"):] }

// run drives the phases and returns the report.
func (s *soak) run(ctx context.Context) *Report {
	rep := &Report{Seed: s.seed, Duration: s.cfg.Duration, Clients: s.cfg.Clients, Proxies: len(s.procs.all),
		DiskFill: !s.cfg.NoTmpfs, Machine: machine()}
	steady := s.procs.all[0]
	rep.Boot = s.measure(steady)

	work, stopWork := context.WithCancel(ctx)
	var clients sync.WaitGroup
	for i := range s.cfg.Clients {
		clients.Go(func() { s.runClient(work, i) })
	}
	hold(ctx, s.cfg.Warmup)
	rep.Baseline = s.quiesced(steady)
	s.events.add("phase", "baseline: "+rep.Baseline.String())
	fmt.Fprintf(s.cfg.Out, "soak: warm-up done; steady proxy at rest: %s\n", rep.Baseline)

	chaos, stopChaos := context.WithTimeout(ctx, s.cfg.Duration)
	start := time.Now()
	var bg sync.WaitGroup
	bg.Go(func() { s.rearmFaults(chaos) })
	bg.Go(func() { s.sample(chaos, start) })
	acts := makeSchedule(s.seed, scheduleOpts{duration: s.cfg.Duration, proxies: len(s.procs.all), diskFill: !s.cfg.NoTmpfs,
		store: s.store != nil})
	s.runChaos(chaos, start, acts)
	<-chaos.Done()
	stopChaos()
	bg.Wait()
	s.gen.calm.Store(true)
	for _, u := range s.ups {
		u.setFaults(hubtest.Faults{})
	}
	s.events.add("phase", "chaos over")
	if ctx.Err() != nil {
		// Interrupted: no quiet phase, no verdict on the run.
		stopWork()
		clients.Wait()
		s.fail("interrupted", "the run was interrupted before the chaos ended")
		s.collect(rep)
		return rep
	}
	fmt.Fprintf(s.cfg.Out, "soak: chaos over after %s; quiet phase\n", time.Since(start).Round(time.Second))

	s.quietPhase(rep, stopWork, &clients)
	s.collect(rep)
	return rep
}

// rearmFaults draws every hub's faults afresh every rearmEvery.
func (s *soak) rearmFaults(ctx context.Context) {
	plan := newFaultPlan(s.seed, s.w.corruptKey)
	t := time.NewTicker(rearmEvery)
	defer t.Stop()
	for {
		for _, u := range s.ups {
			u.setFaults(plan.next())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample follows peak RSS and prints progress.
func (s *soak) sample(ctx context.Context, start time.Time) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range s.procs.all {
			if inc := p.current(); inc != nil {
				if st, err := readProcStats(inc.pid, inc.admin, p.dir); err == nil && st.PeakRSS > s.peakRSS.Load() {
					s.peakRSS.Store(st.PeakRSS)
				}
			}
		}
		if time.Since(last) >= 30*time.Second {
			last = time.Now()
			t := s.stats.totals()
			fmt.Fprintf(s.cfg.Out, "soak: %4.0fs  %d requests (%d served, %d refused, %d unavailable, %d violations), %d faults, %d kills\n",
				time.Since(start).Seconds(), t[outServed]+t[outRefused]+t[outMissing]+t[outUnavailable]+t[outViolation],
				t[outServed], t[outRefused], t[outUnavailable], s.stats.violations(), s.faultTotal(), s.kills.Load())
		}
	}
}

// faultTotal is every fault every hub fired.
func (s *soak) faultTotal() int64 {
	var n int64
	for _, u := range s.ups {
		for _, c := range u.hub.FaultCounts() {
			n += c
		}
	}
	return n
}

// cleanup stops everything the run started and removes its traces, keeping
// the work directory if the run failed.
func (s *soak) cleanup() {
	if s.procs != nil {
		for _, p := range append(s.procs.all[:len(s.procs.all):len(s.procs.all)], s.cold, s.small) {
			if p == nil {
				continue
			}
			p.kill() // a run that ended early; a finished one stopped them
			_ = p.sink.close()
		}
	}
	if s.store != nil {
		s.store.close()
	}
	for _, u := range s.ups {
		if u.hubRelay != nil {
			u.hubRelay.close()
			u.cdnRelay.close()
			u.foreign.close()
		}
		u.hub.Close()
	}
	for _, m := range s.mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if s.cfg.WorkDir == "" && s.workDir != "" {
		_ = os.RemoveAll(s.workDir)
	}
}

func joinLines(ls []string) string {
	out := ""
	for i, l := range ls {
		if i > 0 {
			out += "\n    "
		}
		out += l
	}
	return out
}
