package soak

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// relayMode is what a relay does with connections.
type relayMode int32

const (
	relayUp        relayMode = iota // forward to the target
	relayRefuse                     // reset every connection at once
	relayBlackhole                  // accept and never answer: timeouts
)

func (m relayMode) String() string { return [...]string{"up", "refuse", "blackhole"}[m] }

// relay is a TCP forwarder in front of one of the fake hub's servers, so the
// chaos can make upstream unreachable in the ways a network does: refused,
// or silent. It forwards bytes untouched (so the hub's resets, truncations
// and stalls reach hubproxy as they were sent), and it notes what each
// connection was doing when it ended: the first line of the request in
// flight and how many bytes of its answer had passed (HTTP/1.1 without
// pipelining: a request follows only a finished answer), which the byte
// ledger counts as possibly lost.
type relay struct {
	name   string
	ln     net.Listener
	target string
	mode   atomic.Int32
	// lost is told, when a connection ends, the request line in flight and
	// the bytes of its answer that had passed.
	lost func(reqLine string, n int64)

	mu    sync.Mutex // guards pipes and held
	pipes map[*pipe]struct{}
	held  map[net.Conn]struct{} // blackholed
	wg    sync.WaitGroup

	refused atomic.Int64 // connections refused or blackholed
}

// pipe is one forwarded connection.
type pipe struct {
	down, up net.Conn // down: hubproxy's side; up: the hub's

	mu        sync.Mutex // guards the fields below
	reqLine   string
	answered  int64 // bytes of the answer to reqLine so far
	noAccount bool  // cut on purpose while idle: nothing to count
}

func newRelay(name, target string, lost func(string, int64)) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{name: name, ln: ln, target: target, lost: lost, pipes: map[*pipe]struct{}{}, held: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// URL is the relay's base URL.
func (r *relay) URL() string { return "http://" + r.ln.Addr().String() }

// Host is the relay's host:port, as requests through it name it.
func (r *relay) Host() string { return r.ln.Addr().String() }

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		switch relayMode(r.mode.Load()) {
		case relayRefuse:
			r.refused.Add(1)
			reset(c)
		case relayBlackhole:
			r.refused.Add(1)
			r.mu.Lock()
			r.held[c] = struct{}{}
			r.mu.Unlock()
		default:
			r.wg.Add(1)
			go r.forward(c)
		}
	}
}

// reset closes c with a TCP RST, as a refusing or crashed peer does.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (r *relay) forward(down net.Conn) {
	defer r.wg.Done()
	up, err := net.DialTimeout("tcp", r.target, 2*time.Second)
	if err != nil {
		reset(down)
		return
	}
	p := &pipe{down: down, up: up}
	r.mu.Lock()
	r.pipes[p] = struct{}{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(up, down, true) })
	wg.Go(func() { p.copy(down, up, false) })
	wg.Wait()
	_ = down.Close()
	_ = up.Close()
	r.mu.Lock()
	delete(r.pipes, p)
	r.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.noAccount && p.answered > 0 && r.lost != nil {
		r.lost(p.reqLine, p.answered)
	}
}

// copy moves bytes from src to dst until either ends. request says the
// bytes are hubproxy's requests (else the hub's answers). A clean end is
// passed on as a half-close, an abrupt one as a reset of both sides.
func (p *pipe) copy(dst, src net.Conn, request bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.note(buf[:n], request)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				reset(src)
				reset(dst)
				return
			}
		}
		if err == nil {
			continue
		}
		if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
			_ = tc.CloseWrite()
			return
		}
		reset(src)
		reset(dst)
		return
	}
}

// note records request starts and answer bytes.
func (p *pipe) note(b []byte, request bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !request {
		p.answered += int64(len(b))
		return
	}
	if p.answered > 0 || p.reqLine == "" {
		line, _, _ := bytes.Cut(b, []byte("\r\n"))
		p.reqLine, p.answered = string(line), 0
	}
}

// set changes the mode. Leaving "up" cuts every forwarded connection, as a
// partition does; leaving "blackhole" resets the held ones.
func (r *relay) set(m relayMode) {
	old := relayMode(r.mode.Swap(int32(m)))
	if old == m {
		return
	}
	if old == relayUp {
		r.cut(false)
	}
	if old == relayBlackhole {
		r.mu.Lock()
		for c := range r.held {
			reset(c)
			delete(r.held, c)
		}
		r.mu.Unlock()
	}
}

// cut resets every forwarded connection. With idle set nothing is counted
// as lost: the driver cuts idle connections to measure a quiet proxy.
func (r *relay) cut(idle bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.pipes {
		if idle {
			p.mu.Lock()
			p.noAccount = true
			p.mu.Unlock()
		}
		reset(p.down)
		reset(p.up)
	}
}

// close stops the relay and waits for its goroutines.
func (r *relay) close() {
	_ = r.ln.Close()
	r.set(relayRefuse)
	r.cut(true)
	r.wg.Wait()
}
