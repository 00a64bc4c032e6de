package hubtest

import (
	"net"
	"sync"
	"time"
)

// shapedListener wraps accepted connections so their writes obey the hub's
// current bandwidth cap.
type shapedListener struct {
	net.Listener
	hub *Hub
}

func (l *shapedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &shapedConn{Conn: c, hub: l.hub, closed: make(chan struct{})}, nil
}

// shapedConn paces writes through a token bucket at Hub.bandwidth bytes per
// second, read afresh for every chunk so a new cap applies to open
// connections at once. Reads are not shaped: requests are small.
type shapedConn struct {
	net.Conn
	hub *Hub

	mu     sync.Mutex // guards b
	b      bucket
	closed chan struct{} // closed by Close; ends a pacing wait
	once   sync.Once
}

func (c *shapedConn) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		rate := c.hub.bandwidth.Load()
		if rate <= 0 {
			n, err := c.Conn.Write(p)
			return total + n, err
		}
		chunk := min(len(p), int(burst(rate)))
		c.mu.Lock()
		wait := c.b.reserve(chunk, rate, time.Now())
		c.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
				return total, net.ErrClosed
			case <-c.hub.done:
				t.Stop()
				return total, net.ErrClosed
			}
		}
		n, err := c.Conn.Write(p[:chunk])
		total += n
		if err != nil {
			return total, err
		}
		p = p[chunk:]
	}
	return total, nil
}

func (c *shapedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// reset closes the connection with a TCP RST instead of a FIN, as a peer
// that crashed or a middlebox that gave up would.
func (c *shapedConn) reset() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return c.Close()
}

// burst is the bucket's capacity at rate: a fiftieth of a second's worth, so
// pacing is smooth, but at least 512 bytes so tiny caps still make progress.
func burst(rate int64) int64 { return max(rate/50, 512) }

// bucket is a token bucket measured in bytes. It is a pure value so tests can
// drive it with their own clock.
type bucket struct {
	tokens float64 // may go negative: debt that the next wait pays off
	last   time.Time
}

// reserve takes n bytes at rate bytes/s and says how long to wait before
// sending them. The first call starts with a full bucket.
func (b *bucket) reserve(n int, rate int64, now time.Time) time.Duration {
	capacity := float64(burst(rate))
	if b.last.IsZero() {
		b.tokens = capacity
	} else if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(capacity, b.tokens+elapsed.Seconds()*float64(rate))
	}
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / float64(rate) * float64(time.Second))
}
