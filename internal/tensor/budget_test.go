package tensor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// gatedFiles serves files of which it holds only the first bytes (all a
// header read needs; the data buffer is never built). A read reaching past
// the first speculative read (the header read whole) signals rest[path] and,
// when gate[path] is set, waits for it to close. Every read is recorded,
// and the close of a blob that read anything signals closed[path]: that is
// the end of a shared header read.
type gatedFiles struct {
	heads  map[string][]byte
	sizes  map[string]int64
	spec   int64
	gate   map[string]chan struct{}
	rest   map[string]chan struct{}
	closed map[string]chan struct{}

	mu       sync.Mutex
	restOnce map[string]bool
	read     map[string]int64 // bytes read, by path
}

func newGatedFiles(spec int64) *gatedFiles {
	return &gatedFiles{heads: map[string][]byte{}, sizes: map[string]int64{}, spec: spec,
		gate: map[string]chan struct{}{}, rest: map[string]chan struct{}{}, closed: map[string]chan struct{}{},
		restOnce: map[string]bool{}, read: map[string]int64{}}
}

func (g *gatedFiles) add(p string, head []byte, size int64, gated bool) {
	g.heads[p], g.sizes[p] = head, size
	g.rest[p], g.closed[p] = make(chan struct{}), make(chan struct{}, 16)
	if gated {
		g.gate[p] = make(chan struct{})
	}
}

func (g *gatedFiles) readOf(p string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.read[p]
}

func (g *gatedFiles) Stat(ctx context.Context, _ hub.Caller, ref hub.FileRef) (resolver.Meta, error) {
	p := ref.Path
	if _, ok := g.heads[p]; !ok {
		return resolver.Meta{}, notFound(p)
	}
	return fakeMeta(`"`+p+`"`, g.sizes[p]), nil
}

func (g *gatedFiles) Open(ctx context.Context, _ hub.Caller, ref hub.FileRef) (Blob, error) {
	p := ref.Path
	head, ok := g.heads[p]
	if !ok {
		return nil, notFound(p)
	}
	return &gatedBlob{g: g, p: p, head: head, ctx: ctx}, nil
}

type gatedBlob struct {
	g    *gatedFiles
	p    string
	head []byte
	ctx  context.Context
	used bool
}

func (b *gatedBlob) ReadAt(p []byte, off int64) (int, error) {
	b.used = true
	g := b.g
	if off+int64(len(p)) > g.spec {
		g.mu.Lock()
		first := !g.restOnce[b.p]
		g.restOnce[b.p] = true
		g.mu.Unlock()
		if first {
			close(g.rest[b.p])
		}
		if gate := g.gate[b.p]; gate != nil {
			select {
			case <-gate:
			case <-b.ctx.Done():
				return 0, b.ctx.Err()
			}
		}
	}
	g.mu.Lock()
	g.read[b.p] += int64(len(p))
	g.mu.Unlock()
	if off >= int64(len(b.head)) {
		return 0, io.EOF
	}
	n := copy(p, b.head[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (b *gatedBlob) Expect(off, end int64)        {}
func (b *gatedBlob) Present(off, end int64) int64 { return 0 }
func (b *gatedBlob) Close() error {
	if b.used {
		b.g.closed[b.p] <- struct{}{}
	}
	return nil
}

// padded is the first 8+N bytes of a valid file with one tensor and a
// header padded to n bytes, and the file's size.
func padded(n int) ([]byte, int64) {
	js := `{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`
	js += strings.Repeat(" ", n-len(js))
	head := binary.LittleEndian.AppendUint64(nil, uint64(n))
	return append(head, js...), int64(8 + n + 4)
}

// Two listings of big headers that do not both fit the parse budget: the
// second waits for the first to finish parsing before it reads its header
// whole. The events are ordered by the fake's gates, not by time: while
// a's read is held, b either reaches its own read (the bug: both headers
// whole in memory at once) or starts waiting for budget (the fix).
func TestParseBudgetSerialisesBigHeaders(t *testing.T) {
	const spec, n = 1 << 10, 100 << 10
	g := newGatedFiles(spec)
	head, size := padded(n)
	g.add("a.safetensors", head, size, true)
	g.add("b.safetensors", head, size, false)
	s := New(g, Options{SpeculativeRead: spec, ParseBudget: n * 3 / 2})
	waiting := make(chan struct{}, 4)
	s.budget.onWait = func() { waiting <- struct{}{} }

	errs := make(chan error, 2)
	list := func(p string) {
		c, err := s.List(t.Context(), hub.Caller{}, testRef(p))
		if err == nil && (len(c.Files) != 1 || c.Totals().Tensors != 1) {
			err = fmt.Errorf("%s: %d files, %d tensors", p, len(c.Files), c.Totals().Tensors)
		}
		errs <- err
	}
	go list("a.safetensors")
	receive(t, g.rest["a.safetensors"], "a's header read")
	go list("b.safetensors")
	select {
	case <-g.rest["b.safetensors"]:
		t.Fatal("b read its header whole while a's parse held the budget: both headers in memory at once")
	case <-waiting:
	}
	if inUse, _, w := s.budget.stats(); inUse != n || w != 1 {
		t.Fatalf("budget holds %d bytes with %d waiting; want a's %d and b waiting", inUse, w, n)
	}
	close(g.gate["a.safetensors"])
	for range 2 {
		if err := receive(t, errs, "a listing"); err != nil {
			t.Fatal(err)
		}
	}
	if inUse, peak, w := s.budget.stats(); inUse != 0 || peak > n*3/2 || w != 0 {
		t.Fatalf("budget after: %d in use, peak %d (budget %d), %d waiting", inUse, peak, n*3/2, w)
	}
}

// A parse waiting for budget waits with its context: when its only caller
// leaves, the shared read stops without reading the header, rather than
// reading and parsing it for nobody once the budget frees up.
func TestParseBudgetWaitEndsWithTheCaller(t *testing.T) {
	const spec, n = 1 << 10, 100 << 10
	g := newGatedFiles(spec)
	head, size := padded(n)
	g.add("a.safetensors", head, size, true)
	g.add("b.safetensors", head, size, false)
	s := New(g, Options{SpeculativeRead: spec, ParseBudget: n})
	waiting := make(chan struct{}, 4)
	s.budget.onWait = func() { waiting <- struct{}{} }

	aDone := make(chan error, 1)
	go func() { _, err := s.List(t.Context(), hub.Caller{}, testRef("a.safetensors")); aDone <- err }()
	receive(t, g.rest["a.safetensors"], "a's header read")
	ctx, cancel := context.WithCancel(t.Context())
	bDone := make(chan error, 1)
	go func() { _, err := s.List(ctx, hub.Caller{}, testRef("b.safetensors")); bDone <- err }()
	receive(t, waiting, "b waiting for budget")
	cancel()
	if err := receive(t, bDone, "b's listing"); !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v, want context.Canceled", err)
	}
	receive(t, g.closed["b.safetensors"], "b's shared read to stop")
	close(g.gate["a.safetensors"])
	if err := receive(t, aDone, "a's listing"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.rest["b.safetensors"]:
		t.Fatal("b's header was read after its caller had left")
	default:
	}
	if _, _, w := s.budget.stats(); w != 0 {
		t.Fatalf("%d parses still wait", w)
	}
}

// A header larger than the whole budget can never be parsed: it is refused
// as HeaderLimitExceeded after the speculative read, not waited for.
func TestHeaderOverTheParseBudgetIsRefused(t *testing.T) {
	const spec, n = 1 << 10, 100 << 10
	g := newGatedFiles(spec)
	head, size := padded(n)
	g.add("a.safetensors", head, size, false)
	s := New(g, Options{SpeculativeRead: spec, ParseBudget: n - 1})
	_, err := s.List(t.Context(), hub.Caller{}, testRef("a.safetensors"))
	var fe *FileError
	if !errors.As(err, &fe) || !errors.Is(err, header.HeaderLimitExceeded) || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("err = %v, want a FileError of HeaderLimitExceeded naming the budget", err)
	}
	if got := g.readOf("a.safetensors"); got > spec {
		t.Fatalf("read %d bytes of a header it was going to refuse", got)
	}
}

// The operational caps apply by default: a header declaring more than
// DefaultMaxHeaderSize is refused from its 8-byte prefix, before it is read
// whole, and one of more than DefaultMaxTensors tensors is refused too.
func TestDefaultHeaderLimits(t *testing.T) {
	g := newGatedFiles(64 << 10)
	// 17 MiB declared: within the reference's 100 MB, over the default.
	const declared = 17 << 20
	prefix := binary.LittleEndian.AppendUint64(nil, declared)
	prefix = append(prefix, `{"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`...)
	g.add("big.safetensors", prefix, 8+declared, false)
	// DefaultMaxTensors+1 entries in the array form, some 25 bytes each.
	var js strings.Builder
	js.WriteString("{")
	for i := range DefaultMaxTensors + 1 {
		if i > 0 {
			js.WriteByte(',')
		}
		fmt.Fprintf(&js, `"%x":["U8",[0],[0,0]]`, i)
	}
	js.WriteString("}")
	many := binary.LittleEndian.AppendUint64(nil, uint64(js.Len()))
	many = append(many, js.String()...)
	g.add("many.safetensors", many, int64(len(many)), false)

	s := New(g, Options{})
	for _, p := range []string{"big.safetensors", "many.safetensors"} {
		_, err := s.List(t.Context(), hub.Caller{}, testRef(p))
		var fe *FileError
		if !errors.As(err, &fe) || !errors.Is(err, header.HeaderLimitExceeded) {
			t.Fatalf("%s: %v, want a FileError of HeaderLimitExceeded", p, err)
		}
		t.Logf("%s: %v", p, err)
	}
	if got := g.readOf("big.safetensors"); got > 64<<10 {
		t.Fatalf("read %d bytes of a header over the limit", got)
	}
	if s.opts.MaxHeaderSize != 16<<20 || s.opts.MaxTensors != 200_000 || s.budget.size != 32<<20 {
		t.Fatalf("defaults: header %d, tensors %d, budget %d", s.opts.MaxHeaderSize, s.opts.MaxTensors, s.budget.size)
	}
}
