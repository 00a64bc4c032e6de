package soak

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
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
// connection was doing when it ended: the request in flight (its first line
// and Range) and how much of its answer had passed, and whether that was
// all of it on a connection that ended cleanly (HTTP/1.1 without
// pipelining: a request follows only a finished answer), which the byte
// ledger counts as possibly lost.
//
// It also plays an upstream that fails for one caller-chosen path: a POST
// whose path holds baitMarker is answered 500 by the relay itself, never
// reaching the hub. Those are the attacker's pass-through requests, sent to
// open hubproxy's upstream breaker for everyone (the soak checks that it
// does not).
type relay struct {
	name   string
	ln     net.Listener
	target string
	mode   atomic.Int32
	// lost is told, when a connection ends, the request line in flight, its
	// Range, the bytes of its answer that had passed and whether that was
	// the whole answer.
	lost func(reqLine, rng string, n int64, complete bool)

	mu    sync.Mutex // guards pipes and held
	pipes map[*pipe]struct{}
	held  map[net.Conn]struct{} // blackholed
	wg    sync.WaitGroup

	refused atomic.Int64 // connections refused or blackholed
	baited  atomic.Int64 // bait requests answered 500
}

// baitMarker marks the attacker's pass-through POSTs, which the relay
// answers 500 as a failing upstream would.
const baitMarker = "/soak-breaker-bait"

// pipe is one forwarded connection.
type pipe struct {
	down, up net.Conn // down: hubproxy's side; up: the hub's

	mu        sync.Mutex // guards the fields below
	req       []byte     // the request in flight so far, up to its header's end and a little body
	reqLine   string
	reqRange  string
	reqNeed   int64 // the request's length, once its header is in (a bait's body is read, not forwarded)
	reqSeen   int64
	bait      bool
	answered  int64  // bytes of the answer to reqLine so far
	resp      []byte // the answer's header so far, until it is parsed
	respWant  int64  // the answer's body length: -1 unknown (chunked, or not yet parsed)
	respBody  int64
	noAccount bool // cut on purpose while idle, or answered by the relay: nothing to count
	ended     bool // the relay answered and closed: the hub's side ends quietly
	// abrupt: the connection ended with a reset, by either side or by a
	// partition. Then even an answer the relay passed whole may be lost:
	// a reset discards what the receiver had not read, and a proxy that
	// closes with unread bytes (a cancelled fill) resets.
	abrupt bool
}

func newRelay(name, target string, lost func(string, string, int64, bool)) (*relay, error) {
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
	p := &pipe{down: down, up: up, respWant: -1}
	r.mu.Lock()
	r.pipes[p] = struct{}{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		if p.copy(up, down, true) {
			r.baited.Add(1)
		}
	})
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
		r.lost(p.reqLine, p.reqRange, p.answered, !p.abrupt && p.respWant >= 0 && p.respBody >= p.respWant)
	}
}

// copy moves bytes from src to dst until either ends. request says the
// bytes are hubproxy's requests (else the hub's answers). A clean end is
// passed on as a half-close, an abrupt one as a reset of both sides. It
// reports whether it answered a bait request (and so ended the connection).
func (p *pipe) copy(dst, src net.Conn, request bool) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch p.note(buf[:n], request) {
			case baitWhole:
				p.answerBait()
				return true
			case baitPart:
				continue // not the hub's to see
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.abort(src, dst)
				return false
			}
		}
		if err == nil {
			continue
		}
		if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
			_ = tc.CloseWrite()
			return false
		}
		p.abort(src, dst)
		return false
	}
}

// abort resets both sides, unless the relay answered the connection itself
// (a reset would destroy its answer in flight).
func (p *pipe) abort(src, dst net.Conn) {
	p.mu.Lock()
	ended := p.ended
	p.abrupt = p.abrupt || !ended
	p.mu.Unlock()
	if !ended {
		reset(src)
		reset(dst)
	}
}

// answerBait answers the request in flight 500 and ends the connection.
func (p *pipe) answerBait() {
	const body = `{"error":"Internal Error - We're working hard to fix this as soon as possible!"}`
	p.mu.Lock()
	p.ended, p.noAccount = true, true
	p.mu.Unlock()
	_, _ = io.WriteString(p.down, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
	if tc, ok := p.down.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = p.up.Close() // ends the other direction's copy, quietly
}

// baitState is what note found a request's bytes to be.
type baitState int

const (
	baitNone  baitState = iota // forward
	baitPart                   // part of a bait request: keep reading
	baitWhole                  // a bait request, read whole: answer it
)

// maxHead bounds the header bytes kept of a request or an answer.
const maxHead = 64 << 10

// note records request starts (line and Range) and answer bytes (the
// answer's declared length and how much of it passed).
func (p *pipe) note(b []byte, request bool) baitState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !request {
		p.answered += int64(len(b))
		if p.respWant >= 0 || len(p.resp) >= maxHead {
			p.respBody += int64(len(b))
			return baitNone
		}
		p.resp = append(p.resp, b...)
		if end := bytes.Index(p.resp, []byte("\r\n\r\n")); end >= 0 {
			p.respWant = bodyLength(p.resp[:end], p.reqLine)
			p.respBody = int64(len(p.resp) - end - 4)
			p.resp = nil
		}
		return baitNone
	}
	if p.answered > 0 || p.reqLine == "" && p.req == nil {
		// A new request: the one before was answered (or none came yet).
		p.req, p.reqLine, p.reqRange, p.reqNeed, p.reqSeen, p.bait = nil, "", "", 0, 0, false
		p.answered, p.resp, p.respWant, p.respBody = 0, nil, -1, 0
	}
	p.reqSeen += int64(len(b))
	if p.reqNeed == 0 && len(p.req) < maxHead {
		p.req = append(p.req, b...)
		if end := bytes.Index(p.req, []byte("\r\n\r\n")); end >= 0 {
			p.parseRequest(p.req[:end])
			p.reqNeed = int64(end+4) + contentLength(p.req[:end])
		} else if line, _, ok := bytes.Cut(p.req, []byte("\r\n")); ok && p.reqLine == "" {
			p.reqLine = string(line)
		}
	}
	if line, _, _ := bytes.Cut(p.req, []byte("\r\n")); !p.bait && bytes.HasPrefix(line, []byte("POST ")) && bytes.Contains(line, []byte(baitMarker)) {
		p.bait = true
	}
	switch {
	case !p.bait:
		return baitNone
	case p.reqNeed > 0 && p.reqSeen >= p.reqNeed:
		return baitWhole
	}
	return baitPart
}

// parseRequest takes a request's header block.
func (p *pipe) parseRequest(head []byte) {
	lines := strings.Split(string(head), "\r\n")
	p.reqLine = lines[0]
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Range") {
			p.reqRange = strings.TrimSpace(v)
		}
	}
}

// contentLength is a header block's Content-Length, 0 if none.
func contentLength(head []byte) int64 {
	for _, l := range strings.Split(string(head), "\r\n")[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
				return n
			}
		}
	}
	return 0
}

// bodyLength is the body length an answer's header block declares: none
// for a HEAD, a 1xx, 204 or 304; -1 when it does not say (chunked).
func bodyLength(head []byte, reqLine string) int64 {
	status := strings.Fields(strings.SplitN(string(head), "\r\n", 2)[0])
	if strings.HasPrefix(reqLine, "HEAD ") || len(status) > 1 && (strings.HasPrefix(status[1], "1") || status[1] == "204" || status[1] == "304") {
		return 0
	}
	for _, l := range strings.Split(string(head), "\r\n")[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
				return n
			}
		}
	}
	return -1
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
		p.mu.Lock()
		p.noAccount = p.noAccount || idle
		p.abrupt = true
		p.mu.Unlock()
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
