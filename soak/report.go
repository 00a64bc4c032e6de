package soak

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Report is what a run found: the figures the README's reliability section
// quotes, and the failures if any.
type Report struct {
	Seed     uint64
	Duration time.Duration
	Clients  int
	Proxies  int
	DiskFill bool
	Machine  string

	Requests, Served, Refused, Missing, Unavailable int64
	Violations, WrongBytes, AccessViolations        int64
	Faulted, Upstream                               int64
	FaultsByKind                                    map[string]int64
	RelayRefused                                    int64
	Kills, DiskFills, Outages, Storms, Attacks      int64
	Stale, LateN                                    int64
	LateMax                                         time.Duration

	Boot, Baseline, After procStats
	PeakRSS               int64
	Leaks                 int
	Blobs, CorruptBlobs   int
	Verify                []string
	Herd                  []string
	Phases                []string // the slow owner's and the small disk's (phases.go)
	Breaker               []string
	Ledger                []ledgerLine
	StoreOn               bool
	Store                 storeLine
	Failed                bool

	table, unavailable string
	failures           []failure
	workDir            string
}

type ledgerLine struct {
	proxy string
	total excess
	sent  int64
}

// collect fills in the figures.
func (s *soak) collect(rep *Report) {
	t := s.stats.totals()
	rep.Served, rep.Refused, rep.Missing, rep.Unavailable = t[outServed], t[outRefused], t[outMissing], t[outUnavailable]
	rep.Requests = rep.Served + rep.Refused + rep.Missing + rep.Unavailable + t[outViolation]
	rep.Violations = s.stats.violations()
	rep.WrongBytes = s.stats.class("wrong-bytes")
	rep.AccessViolations = s.stats.class("access")
	rep.FaultsByKind = map[string]int64{}
	for _, u := range s.ups {
		for k, n := range u.hub.FaultCounts() {
			rep.FaultsByKind[k] += n
			rep.Faulted += n
		}
		rep.RelayRefused += u.hubRelay.refused.Load() + u.cdnRelay.refused.Load()
		rep.Upstream += u.hub.Counters().Requests
	}
	rep.Kills, rep.DiskFills, rep.Outages = s.kills.Load(), s.diskFills.Load(), s.outages.Load()
	rep.Storms, rep.Attacks = s.storms.Load(), s.attacks.Load()
	s.stats.mu.Lock()
	rep.Stale, rep.LateN, rep.LateMax = s.stats.stale, s.stats.lateN, s.stats.lateMax
	rep.failures = append([]failure(nil), s.stats.failures...)
	s.stats.mu.Unlock()
	rep.PeakRSS = max(s.peakRSS.Load(), rep.After.PeakRSS, rep.Baseline.PeakRSS)
	if s.store != nil {
		rep.StoreOn = true
		rep.Store.kills, rep.Store.outages = s.storeKills.Load(), s.storeOutages.Load()
		rep.Store.claimantKills = s.claimantKills.Load()
		for _, t := range s.tampers.list() {
			rep.Store.tampers++
			if t.onDisk {
				rep.Store.tampersOnDisk++
			}
		}
		s.tampers.mu.Lock()
		rep.Store.tampersSkipped = s.tampers.skipped
		s.tampers.mu.Unlock()
		rep.Store.figs = storeFigures{}
		for _, p := range s.everyProxy() {
			rep.Store.figs.add(p.storeFigures())
		}
	}
	rep.table, rep.unavailable = s.stats.table(), s.stats.unavailable()
	rep.Failed = rep.Violations > 0
	rep.workDir = s.workDir
}

// write prints the report, and for a failing run its seed, how to replay
// it, and what led to each failure kept.
func (r *Report) write(w io.Writer) {
	fmt.Fprint(w, r.markdown())
	if !r.Failed {
		fmt.Fprintf(w, "\nsoak: PASS (seed %d)\n", r.Seed)
		return
	}
	fmt.Fprintf(w, "\nsoak: FAIL: %d violations (seed %d). Replay the schedule with:\n  make soak SOAK_FLAGS='-seed %d -duration %s'\nlogs: %s\n",
		r.Violations, r.Seed, r.Seed, r.Duration, r.workDir)
	for i, f := range r.failures {
		fmt.Fprintf(w, "\n--- failure %d (%s) at %s: %s\n", i+1, f.class, f.at.Format(clock), f.text)
		if len(f.events) > 0 {
			fmt.Fprintf(w, "  events before it:\n")
			for _, e := range f.events {
				fmt.Fprintf(w, "    %s\n", e)
			}
		}
		if len(f.logTail) > 0 {
			fmt.Fprintf(w, "  the proxy's last log lines:\n    %s\n", strings.Join(f.logTail, "\n    "))
		}
	}
}

// markdown renders the figures.
func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Soak run: seed %d, %s of chaos, %d clients, %d hubproxy processes\n\n", r.Seed, r.Duration, r.Clients, r.Proxies)
	fmt.Fprintf(&b, "Machine: %s\n\n", r.Machine)
	fmt.Fprintf(&b, "| Figure | Value |\n|---|---|\n")
	row := func(k string, v any) { fmt.Fprintf(&b, "| %s | %v |\n", k, v) }
	row("requests answered", fmt.Sprintf("%d (%d served right, %d refused as the hub would, %d missing as the hub says, %d unavailable)",
		r.Requests, r.Served, r.Refused, r.Missing, r.Unavailable))
	row("upstream requests", r.Upstream)
	row("faulted upstream requests", fmt.Sprintf("%d (%s)", r.Faulted, kinds(r.FaultsByKind)))
	row("connections refused or blackholed by outages", r.RelayRefused)
	row("kills survived (SIGKILL, restart)", r.Kills)
	disk := fmt.Sprint(r.DiskFills)
	if !r.DiskFill {
		disk = "off (-no-tmpfs)"
	}
	row("disk fills", disk)
	row("upstream outages", r.Outages)
	row("upstream error storms (503 or 429 to everything)", r.Storms)
	row("attacker requests (refused callers on gated repos around outages and storms)", r.Attacks)
	row("wrong bytes", r.WrongBytes)
	row("gated/private bytes to a refused caller", r.AccessViolations)
	row("violations (all kinds)", r.Violations)
	row("resource leaks", r.Leaks)
	row("corrupt blobs", fmt.Sprintf("%d of %d cached at the end", r.CorruptBlobs, r.Blobs))
	row("peak RSS (any hubproxy)", mib(r.PeakRSS))
	row("steady proxy at boot", r.Boot.String())
	row("steady proxy at rest after warm-up", r.Baseline.String())
	row("steady proxy at rest after the run", r.After.String())
	row("branch answers from the cache's refs while upstream was down", r.Stale)
	row("answers that used the lateness allowance", fmt.Sprintf("%d (at most %s beyond access-ttl)", r.LateN, r.LateMax.Round(time.Millisecond)))
	for _, l := range r.Ledger {
		t := l.total
		row("upstream bytes, "+l.proxy, fmt.Sprintf("%s sent, %s in complete answers; %s fetched again (beyond one fetch per block), "+
			"%s of it explained block by block, each event one refetch of each block it touched (credited: %s)",
			mib(l.sent), mib(t.complete), mib(t.refetch), mib(t.explained), t.grantedLine()))
	}
	if r.StoreOn {
		r.storeRows(row)
	}
	for _, h := range r.Herd {
		row("herd", h)
	}
	for _, ph := range r.Phases {
		row("shared tier", ph)
	}
	for _, b := range r.Breaker {
		row("breaker bait", b)
	}
	for _, v := range r.Verify {
		row("cache verify", v)
	}
	fmt.Fprintf(&b, "\n%s\nUnavailability by cause: %s\n", r.table, r.unavailable)
	return b.String()
}

func kinds(m map[string]int64) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// machine describes where the run happened.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(string(b), "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf(", %.1f GiB RAM", float64(kb)/(1<<20))
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s: %d CPUs (%s)%s%s, %s", host, runtime.NumCPU(), cpu, mem, kernel, runtime.Version())
}
