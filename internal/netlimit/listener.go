// Package netlimit bounds the connections a server holds open at once.
// Without a bound, clients that open connections and keep them (idle, or
// sending a request slowly) hold a goroutine, buffers and a file descriptor
// each, for as long as they like, until the process runs out of them.
package netlimit

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Options configures a Listener.
type Options struct {
	// Max is the most connections open at once; 0 or less is no cap.
	Max int
	// OnWait, when set, is called each time Accept finds Max connections
	// open and has to wait for one to close (a metric's counter).
	OnWait func()
}

// Listener is a net.Listener that holds at most Max accepted connections
// open at once. At the cap, Accept waits for one to close before it takes
// the next from the kernel's queue: a connection beyond the cap waits there
// (its client sees no answer yet) rather than being refused, so a short
// burst is served late instead of failing, while the process's memory and
// descriptors stay bounded.
type Listener struct {
	net.Listener
	opts Options
	sem  chan struct{} // one token per open connection; nil without a cap
	open atomic.Int64

	closeOnce sync.Once
	done      chan struct{} // closed by Close, to end a waiting Accept
}

// Limit wraps ln.
func Limit(ln net.Listener, opts Options) *Listener {
	l := &Listener{Listener: ln, opts: opts, done: make(chan struct{})}
	if opts.Max > 0 {
		l.sem = make(chan struct{}, opts.Max)
	}
	return l
}

// Open is the number of accepted connections not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Accept waits for a free slot, then for a connection.
func (l *Listener) Accept() (net.Conn, error) {
	if err := l.acquire(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release()
		return nil, err
	}
	l.open.Add(1)
	return newConn(c, l), nil
}

func (l *Listener) acquire() error {
	if l.sem == nil {
		return nil
	}
	select {
	case l.sem <- struct{}{}:
		return nil
	default:
	}
	if l.opts.OnWait != nil {
		l.opts.OnWait()
	}
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-l.done:
		return net.ErrClosed
	}
}

func (l *Listener) release() {
	if l.sem != nil {
		<-l.sem
	}
}

// Close stops accepting, ending an Accept waiting for a slot too.
// Connections already accepted stay open.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// conn gives its slot back when closed, once however often it is closed.
type conn struct {
	net.Conn
	once sync.Once
	l    *Listener
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.release()
	})
	return err
}

// newConn wraps c. net/http looks for io.ReaderFrom on the connection to
// send files with sendfile(2) and for CloseWrite to close politely; an
// embedded net.Conn hides both, so the wrapper passes them on when the
// connection has them (a *net.TCPConn does).
func newConn(c net.Conn, l *Listener) net.Conn {
	w := &conn{Conn: c, l: l}
	if _, ok := c.(io.ReaderFrom); ok {
		return &fastConn{w}
	}
	return w
}

type fastConn struct{ *conn }

func (c *fastConn) ReadFrom(r io.Reader) (int64, error) {
	return c.Conn.(io.ReaderFrom).ReadFrom(r)
}

// CloseWrite half-closes the connection where it can be.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
