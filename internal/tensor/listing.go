package tensor

import (
	"context"
	"io"
	"math/big"
	"math/bits"
	"slices"
	"strconv"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Listing is the answer of GET /models/{repo}/tensors: every tensor of every
// file, read from headers alone. It is the wire form, for clients that
// decode it (hubproxy ls); the server writes it with Catalog.WriteJSON,
// which never builds it.
type Listing struct {
	Repo     string        `json:"repo"`
	Revision string        `json:"revision"`
	Commit   string        `json:"commit"`
	Index    string        `json:"index,omitempty"`
	Files    []ListedFile  `json:"files"`
	Tensors  []ListedEntry `json:"tensors"`
	Totals   Totals        `json:"totals"`
}

// ListedFile describes one safetensors file.
type ListedFile struct {
	Path         string            `json:"path"`
	ETag         string            `json:"etag"`
	Size         int64             `json:"size"`
	HeaderLength uint64            `json:"header_length"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// ListedEntry is one tensor; Offset is absolute in its file.
type ListedEntry struct {
	Name   string   `json:"name"`
	DType  string   `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	File   string   `json:"file"`
	Offset uint64   `json:"offset"`
	Length uint64   `json:"length"`
}

// Totals sums a listing. Parameters count elements, whatever their width.
type Totals struct {
	Tensors           int               `json:"tensors"`
	Bytes             uint64            `json:"bytes"`
	Parameters        uint64            `json:"parameters"`
	ParametersByDType map[string]uint64 `json:"parameters_by_dtype"`
}

// Catalog is a listing before it is written: the parsed headers it is made
// of. Its JSON (a Listing) is written entry by entry, so listing a header
// of 150,000 tensors costs a few KiB of buffer, not a copy of every entry
// and a body of 20 MB built whole in memory.
type Catalog struct {
	Repo, Revision, Commit, Index string
	Files                         []File
}

// List reads every header of the layout f gives (see Layout; shards
// concurrently) for a listing.
func (s *Service) List(ctx context.Context, c hub.Caller, f hub.FileRef) (*Catalog, error) {
	l, err := s.Layout(ctx, c, f)
	if err != nil {
		return nil, err
	}
	files, err := s.Headers(ctx, c, f.Repo, l)
	if err != nil {
		return nil, err
	}
	return &Catalog{Repo: f.Repo.String(), Revision: f.Rev, Commit: l.Commit, Index: l.Index, Files: files}, nil
}

// Totals sums the catalog's tensors.
func (c *Catalog) Totals() Totals {
	t := Totals{ParametersByDType: map[string]uint64{}}
	for _, f := range c.Files {
		for _, x := range f.Header.Tensors {
			params := elements(x.Shape)
			t.Tensors++
			t.Bytes += x.Len()
			t.Parameters += params
			t.ParametersByDType[string(x.DType)] += params
		}
	}
	return t
}

// WriteJSON writes the catalog as a Listing's JSON, compact, and returns
// the bytes written. It allocates per file and per dtype, never per tensor;
// w should be buffered. Writing to a counter first gives the length.
func (c *Catalog) WriteJSON(w io.Writer) (int64, error) {
	e := &jsonWriter{w: w}
	totals := c.Totals()
	e.raw(`{"repo":`)
	e.str(c.Repo)
	e.raw(`,"revision":`)
	e.str(c.Revision)
	e.raw(`,"commit":`)
	e.str(c.Commit)
	if c.Index != "" {
		e.raw(`,"index":`)
		e.str(c.Index)
	}
	e.raw(`,"files":[`)
	for i, f := range c.Files {
		if i > 0 {
			e.raw(",")
		}
		e.raw(`{"path":`)
		e.str(f.Path)
		e.raw(`,"etag":`)
		e.str(f.ETag)
		e.raw(`,"size":`)
		e.int(f.Size)
		e.raw(`,"header_length":`)
		e.uint(f.Header.HeaderLen)
		if len(f.Header.Metadata) > 0 {
			e.raw(`,"metadata":`)
			e.strMap(f.Header.Metadata)
		}
		e.raw("}")
	}
	e.raw(`],"tensors":[`)
	first := true
	for _, f := range c.Files {
		h := f.Header
		for _, t := range h.Tensors {
			if !first {
				e.raw(",")
			}
			first = false
			off, n := h.FileRange(t)
			e.raw(`{"name":`)
			e.str(t.Name)
			e.raw(`,"dtype":`)
			e.str(string(t.DType))
			e.raw(`,"shape":[`)
			for j, d := range t.Shape {
				if j > 0 {
					e.raw(",")
				}
				e.uint(d)
			}
			e.raw(`],"file":`)
			e.str(f.Path)
			e.raw(`,"offset":`)
			e.uint(off)
			e.raw(`,"length":`)
			e.uint(n)
			e.raw("}")
			e.flush()
		}
	}
	e.raw(`],"totals":{"tensors":`)
	e.int(int64(totals.Tensors))
	e.raw(`,"bytes":`)
	e.uint(totals.Bytes)
	e.raw(`,"parameters":`)
	e.uint(totals.Parameters)
	e.raw(`,"parameters_by_dtype":{`)
	for i, k := range sortedKeys(totals.ParametersByDType) {
		if i > 0 {
			e.raw(",")
		}
		e.str(k)
		e.raw(":")
		e.uint(totals.ParametersByDType[k])
	}
	e.raw("}}}")
	e.write()
	return e.n, e.err
}

// elements is the product of shape. A validated header's tensors fit in
// their file, so the product fits in 64 bits for every byte-or-wider dtype;
// big.Int keeps sub-byte dtypes honest too.
func elements(shape []uint64) uint64 {
	p := uint64(1)
	for i, d := range shape {
		hi, lo := bits.Mul64(p, d)
		if hi != 0 {
			return elementsBig(shape[i:], p)
		}
		p = lo
	}
	return p
}

// elementsBig finishes elements where 64 bits overflow: it saturates, as
// the listing always has, unless a later zero brings the product back.
func elementsBig(rest []uint64, acc uint64) uint64 {
	p := new(big.Int).SetUint64(acc)
	for _, d := range rest {
		p.Mul(p, new(big.Int).SetUint64(d))
	}
	if !p.IsUint64() {
		return ^uint64(0)
	}
	return p.Uint64()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonWriter appends JSON to a small buffer and hands it to w a tensor at
// a time; the first write error sticks and ends the output.
type jsonWriter struct {
	w   io.Writer
	buf []byte
	n   int64
	err error
}

func (e *jsonWriter) raw(s string) { e.buf = append(e.buf, s...) }

func (e *jsonWriter) int(v int64) { e.buf = strconv.AppendInt(e.buf, v, 10) }

func (e *jsonWriter) uint(v uint64) { e.buf = strconv.AppendUint(e.buf, v, 10) }

func (e *jsonWriter) strMap(m map[string]string) {
	e.raw("{")
	for i, k := range sortedKeys(m) {
		if i > 0 {
			e.raw(",")
		}
		e.str(k)
		e.raw(":")
		e.str(m[k])
	}
	e.raw("}")
}

// str appends s as a JSON string, escaped as encoding/json escapes it
// (HTML-safe, U+2028 and U+2029 too). s is valid UTF-8: header text,
// repo ids and paths are all checked before they get here.
func (e *jsonWriter) str(s string) {
	const hex = "0123456789abcdef"
	b := append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 (E2 80 A8/A9) end lines in JavaScript.
		if c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xa8 {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[s[i+2]&0xf])
			i += 3
			start = i
			continue
		}
		i++
	}
	b = append(b, s[start:]...)
	e.buf = append(b, '"')
}

// flush hands the buffer to w once it holds a few KiB.
func (e *jsonWriter) flush() {
	if len(e.buf) >= 4<<10 {
		e.write()
	}
}

// write hands the buffer to w.
func (e *jsonWriter) write() {
	if e.err == nil && len(e.buf) > 0 {
		var m int
		m, e.err = e.w.Write(e.buf)
		e.n += int64(m)
	}
	e.buf = e.buf[:0]
}

func nonNil(s []uint64) []uint64 {
	if s == nil {
		return []uint64{}
	}
	return s
}
