package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// fixedRangeLoad is the load generator of scenarios 8 and 9: conns
// keep-alive HTTP/1.1 connections, each issuing GET u with a Range of
// exactly n bytes at a random offset, back to back, for d. It checks every
// answer (206, exactly n bytes) and ends the run at the first failure.
//
// It is a hand-rolled client rather than net/http's: one goroutine and one
// connection per worker, the request written from a reused buffer with one
// write, the head parsed in place from a bufio.Reader, the body read into a
// pooled buffer and dropped. On a 4 KiB range it costs a few microseconds
// of CPU, so on two cores it leaves nearly all the CPU to the server under
// test; the report says how much it used (clientCPU).
func fixedRangeLoad(ctx context.Context, u string, size, n int64, conns int, d time.Duration, seed uint64) (loadResult, error) {
	if n < 1 || n > size {
		return loadResult{}, fmt.Errorf("harness: range of %d bytes in a file of %d", n, size)
	}
	pu, err := url.Parse(u)
	if err != nil {
		return loadResult{}, err
	}
	if pu.Scheme != "http" {
		return loadResult{}, fmt.Errorf("harness: %s: the load generator speaks plain http only", u)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu    sync.Mutex
		res   loadResult
		first error
		wg    sync.WaitGroup
	)
	cpu0, busy0 := selfCPU(), machineCPU()
	start := time.Now()
	deadline := start.Add(d)
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &rawClient{addr: pu.Host, host: pu.Host, uri: pu.RequestURI(), buf: make([]byte, 256<<10)}
			defer c.close()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			lat := make([]float64, 0, 4096)
			var reqs int
			var werr error
			for time.Now().Before(deadline) {
				if werr = ctx.Err(); werr != nil {
					werr = nil // another worker failed; it reports why
					break
				}
				off := rng.Int64N(size - n + 1)
				t0 := time.Now()
				if werr = c.rangeGet(ctx, off, n, deadline.Add(30*time.Second)); werr != nil {
					if ctx.Err() != nil {
						werr = nil
					}
					break
				}
				lat = append(lat, time.Since(t0).Seconds())
				reqs++
			}
			mu.Lock()
			defer mu.Unlock()
			res.latencies = append(res.latencies, lat...)
			res.requests += reqs
			res.bytes += int64(reqs) * n
			res.dials += c.dials
			if werr != nil && first == nil {
				first = fmt.Errorf("GET %s range %d bytes: %w", u, n, werr)
				cancel()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.clientCPU, res.machineCPU = selfCPU()-cpu0, machineCPU()-busy0
	return res, res.finish(ctx, first, d)
}

// rawClient is one keep-alive HTTP/1.1 connection of the load generator,
// used by one goroutine. It dials again when the server closes the
// connection.
type rawClient struct {
	addr, host, uri string
	buf             []byte // body sink, reused

	conn  net.Conn
	br    *bufio.Reader
	stop  func() bool // unregisters the context hook of conn
	req   []byte
	dials int
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.stop()
		c.conn.Close()
		c.conn = nil
	}
}

// rangeGet issues one GET for bytes [off, off+n) and reads the answer to
// the end. Any error leaves the connection closed.
func (c *rawClient) rangeGet(ctx context.Context, off, n int64, deadline time.Time) error {
	if c.conn == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return err
		}
		c.dials++
		_ = conn.SetDeadline(deadline)
		c.conn = conn
		c.stop = context.AfterFunc(ctx, func() { conn.Close() })
		if c.br == nil {
			c.br = bufio.NewReaderSize(conn, 64<<10)
		} else {
			c.br.Reset(conn) // keeps its buffer
		}
	}
	c.req = append(c.req[:0], "GET "...)
	c.req = append(c.req, c.uri...)
	c.req = append(c.req, " HTTP/1.1\r\nHost: "...)
	c.req = append(c.req, c.host...)
	c.req = append(c.req, "\r\nUser-Agent: hubbench\r\nRange: bytes="...)
	c.req = strconv.AppendInt(c.req, off, 10)
	c.req = append(c.req, '-')
	c.req = strconv.AppendInt(c.req, off+n-1, 10)
	c.req = append(c.req, "\r\n\r\n"...)
	if _, err := c.conn.Write(c.req); err != nil {
		c.close()
		return err
	}
	keep, err := c.readResponse(n)
	if err != nil || !keep {
		c.close()
	}
	return err
}

// readResponse reads one response head and body. It reports whether the
// connection can carry another request.
func (c *rawClient) readResponse(n int64) (keep bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return false, fmt.Errorf("status line: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return false, fmt.Errorf("%w: bad status line %q", ErrShort, line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return false, fmt.Errorf("%w: bad status line %q", ErrShort, line)
	}
	keep = line[7] == '1' // HTTP/1.1 keeps the connection unless told not to
	length, chunked := int64(-1), false
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return false, fmt.Errorf("header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case asciiEqualFold(k, "content-length"):
			if length, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return false, fmt.Errorf("%w: Content-Length %q", ErrShort, v)
			}
		case asciiEqualFold(k, "transfer-encoding"):
			chunked = asciiEqualFold(v, "chunked")
		case asciiEqualFold(k, "connection"):
			if asciiEqualFold(v, "close") {
				keep = false
			} else if asciiEqualFold(v, "keep-alive") {
				keep = true
			}
		}
	}
	if status != http.StatusPartialContent {
		var body []byte
		if length >= 0 && !chunked {
			body, _ = io.ReadAll(io.LimitReader(c.br, min(length, 512)))
		}
		return false, &StatusError{URL: c.host + c.uri, Status: status, Want: http.StatusPartialContent, Body: string(bytes.TrimSpace(body))}
	}
	var body io.Reader
	switch {
	case chunked:
		body = httputil.NewChunkedReader(c.br)
	case length >= 0:
		if length != n {
			return false, fmt.Errorf("%w: Content-Length %d, want %d", ErrShort, length, n)
		}
		body = io.LimitReader(c.br, length)
	default: // delimited by the end of the connection
		body, keep = c.br, false
	}
	var got int64
	for {
		k, err := body.Read(c.buf)
		got += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, fmt.Errorf("body after %d bytes: %w", got, err)
		}
	}
	if got != n {
		return false, fmt.Errorf("%w: %d bytes, want %d", ErrShort, got, n)
	}
	if chunked { // the trailer section, empty or not, ends with an empty line
		for {
			line, err := c.br.ReadSlice('\n')
			if err != nil {
				return false, fmt.Errorf("trailer: %w", err)
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
	}
	return keep, nil
}

// asciiEqualFold reports whether b equals the lower-case ASCII s, ignoring
// case, without allocating.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
