package gpu

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
)

// layout packs sources into one allocation, in order, each at the first
// multiple of align at or after the previous one's end. It returns the
// placements and the allocation size (the last source's end).
func layout(srcs []Source, align int64) ([]Placement, int64, error) {
	if len(srcs) == 0 {
		return nil, 0, fmt.Errorf("%w: no sources", ErrBadRequest)
	}
	pl := make([]Placement, len(srcs))
	var end int64
	for i, s := range srcs {
		switch {
		case s.R == nil:
			return nil, 0, fmt.Errorf("%w: source %d (%q) has no reader", ErrBadRequest, i, s.Name)
		case s.Off < 0 || s.Len < 0 || s.Off > math.MaxInt64-s.Len:
			return nil, 0, fmt.Errorf("%w: source %d (%q) has offset %d, length %d", ErrBadRequest, i, s.Name, s.Off, s.Len)
		case end > math.MaxInt64-align || s.Len > math.MaxInt64-alignUp(end, align):
			return nil, 0, fmt.Errorf("%w: sources overflow int64", ErrBadRequest)
		}
		off := alignUp(end, align)
		pl[i] = Placement{Name: s.Name, Offset: off, Len: s.Len}
		end = off + s.Len
	}
	if end == 0 {
		return nil, 0, fmt.Errorf("%w: all sources are empty", ErrBadRequest)
	}
	return pl, end, nil
}

// fillFrom returns the fillFunc of a packed lease: source bytes at their
// placements, zeros in the alignment gaps.
func fillFrom(srcs []Source, pl []Placement) fillFunc {
	return func(ctx context.Context, dst []byte, off int64) error {
		end := off + int64(len(dst))
		// Placement ends are non-decreasing, so this finds the first
		// placement that reaches into [off, end).
		i := sort.Search(len(pl), func(i int) bool { return pl[i].Offset+pl[i].Len > off })
		cur := off // dst is written up to here
		for ; i < len(pl) && pl[i].Offset < end; i++ {
			p := pl[i]
			if p.Len == 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			from, to := max(p.Offset, off), min(p.Offset+p.Len, end)
			clear(dst[cur-off : from-off])
			at := srcs[i].Off + (from - p.Offset)
			n, err := srcs[i].R.ReadAt(dst[from-off:to-off], at)
			switch {
			case int64(n) == to-from:
				// A full read may come with io.EOF.
			case err == nil || err == io.EOF:
				return &SourceError{Name: p.Name, Off: at, Err: io.ErrUnexpectedEOF}
			default:
				return &SourceError{Name: p.Name, Off: at, Err: err}
			}
			cur = to
		}
		clear(dst[cur-off:])
		return nil
	}
}
