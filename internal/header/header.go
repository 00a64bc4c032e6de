package header

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the reference reader's cap on N, the header length. It is
// inclusive: N = 100,000,000 is accepted.
const MaxHeaderSize = 100_000_000

// PrefixSize is the length of the little-endian u64 that opens every file.
const PrefixSize = 8

// Options tune Parse and HeaderLen. The zero value applies the reference's
// limits.
type Options struct {
	// MaxHeaderSize is an operational cap on N, below the reference's.
	// Zero, or anything at or above MaxHeaderSize, means MaxHeaderSize. A
	// header over the reference cap is HeaderTooLarge; one within it but over
	// this cap is HeaderLimitExceeded, so the two causes stay apart.
	// (huggingface.js and huggingface_hub stop at 25,000,000 when they read
	// headers remotely; the parsed form costs a few times the header's size.)
	MaxHeaderSize uint64
	// MaxTensors is an operational cap on the number of tensors in one
	// header; zero means no cap, as in the reference. The header's byte
	// length does not bound its parsed size well on its own: the array
	// form ["U8",[],[0,0]] spends some 20 bytes of text on a tensor that
	// costs several times that once parsed. A header with more is
	// HeaderLimitExceeded, refused as soon as the entry after the cap is
	// reached, before the rest of the text is decoded.
	MaxTensors int
}

// Tensor is one validated entry of a header.
type Tensor struct {
	Name  string
	DType DType
	// Shape is the logical element count per dimension, row-major; [] is a
	// scalar. Sub-byte dtypes are not halved or otherwise packed here.
	Shape []uint64
	// Begin and End are data_offsets, relative to the data buffer (file
	// offset Header.DataStart). For a tensor from Parse, End-Begin is exactly
	// its element count × dtype bits / 8.
	Begin, End uint64
}

// Len is the tensor's size in bytes (0 if End < Begin, which Parse never
// returns).
func (t Tensor) Len() uint64 {
	if t.End < t.Begin {
		return 0
	}
	return t.End - t.Begin
}

// Header is a parsed and fully validated safetensors header.
type Header struct {
	HeaderLen uint64 // N, the JSON header's length in bytes (padding included)
	DataStart uint64 // 8 + N: the file offset of the data buffer
	FileSize  uint64 // L, the file length it was validated against: DataStart + the last End
	// Metadata is __metadata__: nil when absent or null, empty when {}.
	Metadata map[string]string
	// Tensors are sorted by (Begin, End, Name). They cover [0, FileSize-DataStart)
	// back to back; zero-length tensors may share an offset.
	Tensors []Tensor

	byName map[string]int // index into Tensors; nil for a hand-built Header
}

// Lookup finds a tensor by exact name.
func (h *Header) Lookup(name string) (Tensor, bool) {
	if h.byName != nil {
		i, ok := h.byName[name]
		if !ok {
			return Tensor{}, false
		}
		return h.Tensors[i], true
	}
	for _, t := range h.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// FileRange is t's absolute place in the file: n bytes at off. As an HTTP
// Range that is bytes=off-(off+n-1); a zero-length tensor needs no request.
// t must come from h (the sum cannot overflow then).
func (h *Header) FileRange(t Tensor) (off, n uint64) {
	return h.DataStart + t.Begin, t.Len()
}

func (o Options) limit() uint64 {
	if o.MaxHeaderSize == 0 || o.MaxHeaderSize > MaxHeaderSize {
		return MaxHeaderSize
	}
	return o.MaxHeaderSize
}

// HeaderLen decodes N from the start of prefix, for the speculative first
// read: fetch, say, 64 KiB at offset 0, call HeaderLen, and fetch more only if
// PrefixSize+N is beyond what was read. It applies the reference's checks 1
// and 2 (a prefix shorter than 8 bytes is HeaderTooSmall, which is right when
// it is the whole file) and then the operational limit.
func HeaderLen(prefix []byte, opts Options) (uint64, error) {
	if len(prefix) < PrefixSize {
		return 0, formatErr(HeaderTooSmall, "", "the file is shorter than its 8-byte length prefix")
	}
	n := binary.LittleEndian.Uint64(prefix)
	if n > MaxHeaderSize {
		return 0, formatErr(HeaderTooLarge, "", "declared header length "+strconv.FormatUint(n, 10)+
			" exceeds "+strconv.Itoa(MaxHeaderSize))
	}
	if lim := opts.limit(); n > lim {
		return 0, formatErr(HeaderLimitExceeded, "", "declared header length "+strconv.FormatUint(n, 10)+
			" exceeds this proxy's limit of "+strconv.FormatUint(lim, 10))
	}
	return n, nil
}

// Parse reads and validates the header of a safetensors file of the given
// size, applying the reference's checks in the reference's order
// (docs/safetensors.md §2), so the first failure decides the ErrorKind, plus one
// deviation: a repeated tensor name is DuplicateTensor (checked after the JSON
// has parsed, before any offset check).
//
// It reads only [0, 8+N) from r, never the data buffer, so r may be a buffer
// holding just that prefix. size is the whole file's length; it is needed for
// the final coverage check, and a negative (unknown) size is refused as
// MetadataIncompleteBuffer rather than guessed. Format problems are
// *FormatError; read failures are returned wrapped, as they are.
func Parse(r io.ReaderAt, size int64, opts Options) (*Header, error) {
	if size < 0 {
		return nil, formatErr(MetadataIncompleteBuffer, "", "the file size is unknown")
	}
	if size < PrefixSize {
		return nil, formatErr(HeaderTooSmall, "", "the file is shorter than its 8-byte length prefix")
	}
	var pre [PrefixSize]byte
	if err := readFull(r, pre[:], 0); err != nil {
		return nil, err
	}
	n, err := HeaderLen(pre[:], opts)
	if err != nil {
		return nil, err
	}
	if n > uint64(size)-PrefixSize {
		return nil, formatErr(InvalidHeaderLength, "", "header of "+strconv.FormatUint(n, 10)+
			" bytes runs past the end of a "+strconv.FormatInt(size, 10)+"-byte file")
	}
	buf := make([]byte, n)
	if err := readFull(r, buf, PrefixSize); err != nil {
		return nil, err
	}
	return parseHeader(buf, uint64(size), opts.MaxTensors)
}

// readFull fills p from r at off. io.ReaderAt may return io.EOF together with
// a full read at the end of its data; that is success.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("safetensors: reading header bytes [%d, %d): %w", off, off+int64(len(p)), err)
}

// parseHeader runs checks 4 to 8 on the header text (N = len(text)) of a file
// of size bytes, refusing more than maxTensors tensors (0: any number).
func parseHeader(text []byte, size uint64, maxTensors int) (*Header, error) {
	n := uint64(len(text))
	// 4: strict UTF-8 before any JSON, as Rust's str::from_utf8.
	if !utf8.Valid(text) {
		return nil, formatErr(InvalidHeader, "", "at byte "+strconv.Itoa(PrefixSize+firstInvalidUTF8(text)))
	}
	// 5: the JSON.
	d, err := decodeHeader(text, PrefixSize, maxTensors)
	if err != nil {
		return nil, err
	}
	// Deviation: the reference keeps the last of repeated names.
	byName := make(map[string]int, len(d.tensors))
	for i, t := range d.tensors {
		if _, dup := byName[t.Name]; dup {
			return nil, formatErr(DuplicateTensor, t.Name, "the name appears more than once in the header")
		}
		byName[t.Name] = i
	}
	// 6: offset order; the name breaks ties (only zero-length tensors can
	// tie in a valid file) so the result and the first error are stable.
	ts := d.tensors
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Name < b.Name
	})
	// 7: each tensor in that order.
	var cursor uint64
	for i := range ts {
		t := &ts[i]
		if t.Begin != cursor || t.End < t.Begin {
			return nil, formatErr(InvalidOffset, t.Name, fmt.Sprintf(
				"data_offsets [%d, %d], expected it to begin at %d", t.Begin, t.End, cursor))
		}
		nbytes, err := byteSize(t)
		if err != nil {
			return nil, err
		}
		if t.End-t.Begin != nbytes {
			return nil, formatErr(TensorInvalidInfo, t.Name, fmt.Sprintf(
				"%s%s needs %d bytes, data_offsets give %d", t.DType, shapeString(t.Shape), nbytes, t.End-t.Begin))
		}
		cursor = t.End
		byName[t.Name] = i
	}
	// 8: the tensors cover the data buffer exactly.
	dataStart := PrefixSize + n
	end, carry := bits.Add64(cursor, dataStart, 0)
	if carry != 0 || end != size {
		return nil, formatErr(MetadataIncompleteBuffer, "", fmt.Sprintf(
			"tensors end at data offset %d, but the data buffer holds %d bytes", cursor, size-dataStart))
	}
	return &Header{
		HeaderLen: n,
		DataStart: dataStart,
		FileSize:  size,
		Metadata:  d.metadata,
		Tensors:   ts,
		byName:    byName,
	}, nil
}

// byteSize is checks 7b to 7d: elements (left to right, overflow-checked, so
// [2^32, 2^32, 0] overflows before it reaches the 0) × bits, which must be
// whole bytes.
func byteSize(t *Tensor) (uint64, error) {
	width, ok := t.DType.Bits()
	if !ok {
		return 0, formatErr(TensorInvalidInfo, t.Name, "unknown dtype")
	}
	elems := uint64(1)
	for _, d := range t.Shape {
		hi, lo := bits.Mul64(elems, d)
		if hi != 0 {
			return 0, formatErr(ValidationOverflow, t.Name, "the shape's element count overflows 64 bits")
		}
		elems = lo
	}
	hi, nbits := bits.Mul64(elems, uint64(width))
	if hi != 0 {
		return 0, formatErr(ValidationOverflow, t.Name, "the tensor's size in bits overflows 64 bits")
	}
	if nbits%8 != 0 {
		return 0, formatErr(MisalignedSlice, t.Name, fmt.Sprintf(
			"%s%s is %d bits, not a whole number of bytes", t.DType, shapeString(t.Shape), nbits))
	}
	return nbits / 8, nil
}

// firstInvalidUTF8 is the index of the first byte of b that does not start a
// valid UTF-8 sequence.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// shapeString renders a shape as "[2,3]", cut short for huge ranks.
func shapeString(shape []uint64) string {
	b := []byte{'['}
	for i, d := range shape {
		if i == 8 {
			b = append(b, ",…"...)
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, d, 10)
	}
	return string(append(b, ']'))
}
