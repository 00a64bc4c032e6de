package soak

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// newHTTPClient is the clients' HTTP client: keep-alive connections to the
// proxies, no redirects (hubproxy never sends one), no compression (the
// oracle compares exact bytes), and no timeout of its own (each op has its
// deadline).
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// gate lets the driver pause the clients between ops, to measure a quiet
// proxy.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	busy   int // ops in flight
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// enter waits while paused, then counts an op in.
func (g *gate) enter() {
	g.mu.Lock()
	for g.paused {
		g.cond.Wait()
	}
	g.busy++
	g.mu.Unlock()
}

func (g *gate) leave() {
	g.mu.Lock()
	g.busy--
	g.cond.Broadcast()
	g.mu.Unlock()
}

// pause stops new ops and waits for those in flight.
func (g *gate) pause() {
	g.mu.Lock()
	g.paused = true
	for g.busy > 0 {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

func (g *gate) resume() {
	g.mu.Lock()
	g.paused = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

// runClient sends ops until ctx ends, judging each answer. Each op runs on
// its own deadline, not ctx: the end of the chaos lets ops in flight finish.
func (s *soak) runClient(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(s.seed, uint64(id)+1))
	for ctx.Err() == nil {
		s.gate.enter()
		if ctx.Err() != nil {
			s.gate.leave()
			return
		}
		o := s.gen.next(rng)
		j := s.exec(o, s.procs.pick(rng))
		s.gate.leave()
		if j.out == outUnavailable {
			// A real client backs off; one that does not spins on answers
			// given at cache speed while upstream is down.
			time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		}
	}
}

// exec sends o to p and records the oracle's judgement.
func (s *soak) exec(o *op, p *proxy) judgement {
	_, j := s.execResult(o, p)
	return j
}

// execResult is exec, with the answer as it came (its pace, gaps.go).
func (s *soak) execResult(o *op, p *proxy) (*result, judgement) {
	r := s.send(o, p)
	j := s.oracle.judge(r)
	s.record(r, j)
	return r, j
}

// send performs o against p and reads the answer.
func (s *soak) send(o *op, p *proxy) *result {
	r := &result{op: o, proxy: p.name}
	ctx, cancel := context.WithTimeout(context.Background(), hardTimeout)
	defer cancel()
	addr, _ := p.address()
	defer func() { p.ledger.opEnded(o, r) }()
	r.sent = time.Now()
	req, err := o.request(ctx, "http://"+addr)
	if err != nil {
		r.err, r.headers, r.done = err, r.sent, r.sent
		return r
	}
	resp, err := s.http.Do(req)
	r.headers = time.Now()
	if err != nil {
		r.err, r.done = err, r.headers
		return r
	}
	defer resp.Body.Close()
	r.status, r.header = resp.StatusCode, resp.Header
	g := newGapMeter(r.sent)
	r.body, r.bodyErr = io.ReadAll(io.LimitReader(&gapReader{r: resp.Body, g: g, now: time.Now}, o.limit+1))
	if r.bodyErr == nil && int64(len(r.body)) > o.limit {
		r.bodyErr = errTooLong
	}
	r.done = time.Now()
	r.firstByte, r.maxGap = g.firstByte, g.maxGap
	r.stall = g.stall(r.done, r.bodyErr == nil)
	return r
}
