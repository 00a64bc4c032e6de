package netlimit

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// fakeListener hands out one end of a pipe per Accept.
type fakeListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func newFakeListener() *fakeListener {
	return &fakeListener{conns: make(chan net.Conn, 16), closed: make(chan struct{})}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.closed:
		return nil, net.ErrClosed
	}
}
func (f *fakeListener) Close() error   { close(f.closed); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// dial queues a connection for Accept.
func (f *fakeListener) dial() {
	a, _ := net.Pipe()
	f.conns <- a
}

// accept runs Accept in the background.
func accept(l net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

// At the cap, the next Accept waits (and says so) until a connection
// closes; closing one twice frees one slot, not two.
func TestListenerCapsOpenConnections(t *testing.T) {
	f := newFakeListener()
	waited := make(chan struct{}, 4)
	l := Limit(f, Options{Max: 2, OnWait: func() { waited <- struct{}{} }})
	for range 3 {
		f.dial()
	}
	c1, _ := l.Accept()
	c2, _ := l.Accept()
	third := accept(l)
	<-waited // the third Accept found the cap reached
	select {
	case <-third:
		t.Fatal("a third connection was accepted while two were open")
	default:
	}
	if l.Open() != 2 {
		t.Errorf("open = %d, want 2", l.Open())
	}
	c1.Close()
	c1.Close()
	c3 := <-third
	if c3 == nil {
		t.Fatal("no third connection after one closed")
	}
	f.dial()
	fourth := accept(l)
	<-waited // a double Close gave back one slot only
	c2.Close()
	if <-fourth == nil {
		t.Fatal("no fourth connection after another closed")
	}
	if l.Open() != 2 {
		t.Errorf("open = %d, want 2", l.Open())
	}
}

// Close ends an Accept waiting for a slot.
func TestListenerCloseEndsWaitingAccept(t *testing.T) {
	f := newFakeListener()
	l := Limit(f, Options{Max: 1})
	f.dial()
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	l.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
}

// No cap: every connection is accepted, and still counted.
func TestListenerWithoutCap(t *testing.T) {
	f := newFakeListener()
	l := Limit(f, Options{OnWait: func() { t.Error("waited without a cap") }})
	var conns []net.Conn
	for range 5 {
		f.dial()
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if l.Open() != 5 {
		t.Errorf("open = %d, want 5", l.Open())
	}
	for _, c := range conns {
		c.Close()
	}
	if l.Open() != 0 {
		t.Errorf("open = %d after closing all", l.Open())
	}
}

// readerFromConn is a connection that can send from a reader itself, as a
// *net.TCPConn does with sendfile(2).
type readerFromConn struct {
	net.Conn
	got strings.Builder
}

func (c *readerFromConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(&c.got, r) }

// The wrapper keeps the connection's ReadFrom, which net/http uses to send
// cached files with sendfile(2).
func TestConnKeepsReadFrom(t *testing.T) {
	a, _ := net.Pipe()
	inner := &readerFromConn{Conn: a}
	f := newFakeListener()
	f.conns <- inner
	c, err := Limit(f, Options{Max: 1}).Accept()
	if err != nil {
		t.Fatal(err)
	}
	rf, ok := c.(io.ReaderFrom)
	if !ok {
		t.Fatal("the wrapped connection lost io.ReaderFrom")
	}
	rf.ReadFrom(strings.NewReader("bytes"))
	if inner.got.String() != "bytes" {
		t.Errorf("ReadFrom did not reach the connection: %q", inner.got.String())
	}
	if _, ok := c.(interface{ CloseWrite() error }); !ok {
		t.Error("the wrapped connection lost CloseWrite")
	}
}
