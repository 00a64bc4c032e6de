package soak

import (
	"bufio"
	"strconv"
	"strings"
)

// storeFigures are a proxy's shared-store counters (hubproxy_store_*),
// summed over its incarnations: each is scraped just before it is killed
// or stopped, since a process's counters die with it.
type storeFigures struct {
	Won, Waited, TakenOver float64 // chunk claims, by outcome
	Read, Written          float64 // object bytes
	Requests, Errors       float64
}

func (f *storeFigures) add(o storeFigures) {
	f.Won += o.Won
	f.Waited += o.Waited
	f.TakenOver += o.TakenOver
	f.Read += o.Read
	f.Written += o.Written
	f.Requests += o.Requests
	f.Errors += o.Errors
}

// parseStoreFigures reads the shared-store counters out of a /metrics page.
func parseStoreFigures(page string) storeFigures {
	var f storeFigures
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "hubproxy_store_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		switch {
		case name == `hubproxy_store_claims_total{result="won"}`:
			f.Won += v
		case name == `hubproxy_store_claims_total{result="waited"}`:
			f.Waited += v
		case name == `hubproxy_store_claims_total{result="taken_over"}`:
			f.TakenOver += v
		case name == `hubproxy_store_bytes_total{direction="read"}`:
			f.Read += v
		case name == `hubproxy_store_bytes_total{direction="written"}`:
			f.Written += v
		case strings.HasPrefix(name, "hubproxy_store_requests_total{"):
			f.Requests += v
		case strings.HasPrefix(name, "hubproxy_store_errors_total{"):
			f.Errors += v
		}
	}
	return f
}

// bankStoreFigures scrapes the current incarnation's counters into p's
// totals; it is called just before the incarnation ends. A scrape that
// fails (the process is wedged, or the store is off) banks nothing.
func (p *proxy) bankStoreFigures() {
	inc := p.current()
	if inc == nil {
		return
	}
	page, err := getText("http://" + inc.addr + "/metrics")
	if err != nil {
		return
	}
	f := parseStoreFigures(page)
	p.mu.Lock()
	p.figs.add(f)
	p.mu.Unlock()
}

// storeFigures returns p's banked totals.
func (p *proxy) storeFigures() storeFigures {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.figs
}
