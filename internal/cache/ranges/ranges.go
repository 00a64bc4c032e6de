// Package ranges is a pure value type for the byte ranges of a file that are
// present in a sparse cache file (or claimed by a fill in flight).
//
// A Set is kept sorted and coalesced: its ranges never overlap, never touch
// (two adjacent ranges are merged into one), and none is empty. That canonical
// form makes Present a single binary search and lets a Set be compared, saved
// and reloaded as plain JSON. Nothing here does I/O, so the cache's block logic
// can be tested exhaustively without a disk.
package ranges

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Range is the half-open byte interval [Pos, End). A Range with End <= Pos is
// empty. Half-open bounds are used (rather than Pos/Size) because they compose
// without off-by-one arithmetic: [a,b) and [b,c) are adjacent, and a file of
// size n is [0,n).
type Range struct {
	Pos int64 `json:"pos"`
	End int64 `json:"end"`
}

// Size is the number of bytes in r (0 when r is empty).
func (r Range) Size() int64 {
	if r.End <= r.Pos {
		return 0
	}
	return r.End - r.Pos
}

// IsEmpty reports whether r holds no bytes.
func (r Range) IsEmpty() bool { return r.End <= r.Pos }

// Intersect is the overlap of r and o; it is empty when they do not overlap.
func (r Range) Intersect(o Range) Range {
	x := Range{Pos: max(r.Pos, o.Pos), End: min(r.End, o.End)}
	if x.IsEmpty() {
		return Range{}
	}
	return x
}

// String formats r as "[pos,end)".
func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Pos, r.End) }

// Set is a sorted, coalesced set of ranges. The zero value is an empty set
// ready to use. A Set is not safe for concurrent use; its owner locks it.
type Set struct {
	// rs is sorted by Pos; for consecutive a, b: a.End < b.Pos (no overlap and
	// no adjacency); every element is non-empty.
	rs []Range
}

// search returns the index of the first range whose End is >= pos (when
// touching counts, for Insert) or > pos (otherwise).
func (s *Set) search(pos int64, touching bool) int {
	if touching {
		return sort.Search(len(s.rs), func(i int) bool { return s.rs[i].End >= pos })
	}
	return sort.Search(len(s.rs), func(i int) bool { return s.rs[i].End > pos })
}

// Insert adds r to the set, merging it with every range it overlaps or touches.
// Inserting an empty range is a no-op.
func (s *Set) Insert(r Range) {
	if r.IsEmpty() {
		return
	}
	i := s.search(r.Pos, true)
	// j is the first range that starts strictly after r ends (not touching).
	j := i + sort.Search(len(s.rs)-i, func(k int) bool { return s.rs[i+k].Pos > r.End })
	if i < j {
		r.Pos = min(r.Pos, s.rs[i].Pos)
		r.End = max(r.End, s.rs[j-1].End)
	}
	s.rs = slices.Replace(s.rs, i, j, r)
}

// Remove deletes the bytes of r from the set, splitting a range that r cuts
// through. Removing an empty range is a no-op.
func (s *Set) Remove(r Range) {
	if r.IsEmpty() {
		return
	}
	i := s.search(r.Pos, false)
	// j is the first range that starts at or after r ends: untouched.
	j := i + sort.Search(len(s.rs)-i, func(k int) bool { return s.rs[i+k].Pos >= r.End })
	if i >= j {
		return
	}
	var keep []Range
	if s.rs[i].Pos < r.Pos {
		keep = append(keep, Range{Pos: s.rs[i].Pos, End: r.Pos})
	}
	if s.rs[j-1].End > r.End {
		keep = append(keep, Range{Pos: r.End, End: s.rs[j-1].End})
	}
	s.rs = slices.Replace(s.rs, i, j, keep...)
}

// Present reports whether every byte of r is in the set. An empty r is
// trivially present.
func (s *Set) Present(r Range) bool {
	if r.IsEmpty() {
		return true
	}
	i := s.search(r.Pos, false)
	return i < len(s.rs) && s.rs[i].Pos <= r.Pos && s.rs[i].End >= r.End
}

// Missing returns the gaps of r that are not in the set, in order. It returns
// nil when r is fully present.
func (s *Set) Missing(r Range) []Range {
	if r.IsEmpty() {
		return nil
	}
	var out []Range
	cur := r.Pos
	for i := s.search(r.Pos, false); i < len(s.rs) && s.rs[i].Pos < r.End; i++ {
		if s.rs[i].Pos > cur {
			out = append(out, Range{Pos: cur, End: s.rs[i].Pos})
		}
		cur = max(cur, s.rs[i].End)
	}
	if cur < r.End {
		out = append(out, Range{Pos: cur, End: r.End})
	}
	return out
}

// Size is the total number of bytes in the set.
func (s *Set) Size() int64 {
	var n int64
	for _, r := range s.rs {
		n += r.Size()
	}
	return n
}

// Len is the number of disjoint ranges in the set.
func (s *Set) Len() int { return len(s.rs) }

// Ranges returns a copy of the set's ranges, sorted and coalesced.
func (s *Set) Ranges() []Range { return slices.Clone(s.rs) }

// Clone returns an independent copy of s.
func (s *Set) Clone() Set { return Set{rs: slices.Clone(s.rs)} }

// MarshalJSON writes the set as a JSON array of {"pos","end"} objects.
func (s Set) MarshalJSON() ([]byte, error) {
	if s.rs == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(s.rs)
}

// UnmarshalJSON reads an array of ranges, as MarshalJSON writes it. The input
// is untrusted (a sidecar on disk): ranges with a negative Pos or End < Pos are
// refused, and the rest are inserted one by one, so unsorted or overlapping
// input still yields a canonical set.
func (s *Set) UnmarshalJSON(b []byte) error {
	var rs []Range
	if err := json.Unmarshal(b, &rs); err != nil {
		return err
	}
	var out Set
	for _, r := range rs {
		if r.Pos < 0 || r.End < r.Pos {
			return fmt.Errorf("ranges: invalid range %v", r)
		}
		out.Insert(r)
	}
	*s = out
	return nil
}
