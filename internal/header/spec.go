package header

import (
	"math"
	"strconv"
	"strings"
)

// MaxSpecDims bounds the number of comma-separated parts in a slice spec.
const MaxSpecDims = 64

// ParseSliceSpec parses a Python-like slice spec, one part per dimension
// separated by commas: "0:10,:,5:7". A part is "a:b", "a:", ":b", ":" (with
// an optional step, which must be 1: "a:b:1", "::"), or a single index "i",
// which becomes i:i+1 and, unlike numpy, keeps the dimension. Missing ends
// are 0 and End. Spaces around parts are ignored. Negative indices and other
// steps are refused. The empty spec selects the whole tensor (nil).
// Bounds against the tensor's shape are checked later, by Tensor.Slice.
func ParseSliceSpec(spec string) ([]Dim, error) {
	bad := func(reason string) error {
		return formatErr(InvalidSlice, "", "slice "+quote(spec)+": "+reason)
	}
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	if strings.Count(spec, ",") >= MaxSpecDims {
		return nil, bad("more than " + strconv.Itoa(MaxSpecDims) + " dimensions")
	}
	parts := strings.Split(spec, ",")
	dims := make([]Dim, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		fields := strings.Split(p, ":")
		if len(fields) > 3 {
			return nil, bad("part " + strconv.Itoa(i) + " has too many ':'")
		}
		if len(fields) == 3 && strings.TrimSpace(fields[2]) != "" && strings.TrimSpace(fields[2]) != "1" {
			return nil, bad("steps other than 1 are not supported")
		}
		if len(fields) == 1 {
			v, err := index(fields[0])
			if err != "" {
				return nil, bad("part " + strconv.Itoa(i) + ": " + err)
			}
			if v == math.MaxUint64 {
				return nil, bad("part " + strconv.Itoa(i) + ": index too large")
			}
			dims[i] = Dim{v, v + 1}
			continue
		}
		d := Dim{0, End}
		if f := strings.TrimSpace(fields[0]); f != "" {
			v, err := index(f)
			if err != "" {
				return nil, bad("part " + strconv.Itoa(i) + ": " + err)
			}
			d.Start = v
		}
		if f := strings.TrimSpace(fields[1]); f != "" {
			v, err := index(f)
			if err != "" {
				return nil, bad("part " + strconv.Itoa(i) + ": " + err)
			}
			if v == End {
				return nil, bad("part " + strconv.Itoa(i) + ": index too large")
			}
			d.Stop = v
		}
		if d.Stop != End && d.Start > d.Stop {
			return nil, bad("part " + strconv.Itoa(i) + ": start is after stop")
		}
		dims[i] = d
	}
	return dims, nil
}

// index parses a non-negative decimal index; the string result is the
// problem, "" if none.
func index(s string) (uint64, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, "empty index"
	}
	if s[0] == '-' {
		return 0, "negative indices are not supported"
	}
	if !allDigits(s) {
		return 0, "not a non-negative integer"
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, "index too large"
	}
	return v, ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxShardNumber bounds each number in a shard spec.
const maxShardNumber = math.MaxInt32

// ParseShardSpec parses "dim:rank/world", e.g. "1:3/8" (dimension 1, rank 3
// of 8), for Tensor.Shard. All three are non-negative decimal integers; world
// must be at least 1 and rank below world. The dimension is checked against
// the tensor later, by Shard.
func ParseShardSpec(spec string) (dim, rank, world int, err error) {
	bad := func(reason string) (int, int, int, error) {
		return 0, 0, 0, formatErr(InvalidShard, "", "shard "+quote(spec)+": "+reason)
	}
	d, rw, ok := strings.Cut(spec, ":")
	if !ok {
		return bad("want dim:rank/world, e.g. 1:3/8")
	}
	r, w, ok := strings.Cut(rw, "/")
	if !ok {
		return bad("want dim:rank/world, e.g. 1:3/8")
	}
	var nums [3]int
	for i, s := range []string{d, r, w} {
		if !allDigits(s) {
			return bad("dim, rank and world must be non-negative integers")
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v > maxShardNumber {
			return bad("number too large")
		}
		nums[i] = int(v)
	}
	if nums[2] < 1 {
		return bad("world must be at least 1")
	}
	if nums[1] >= nums[2] {
		return bad("rank must be below world")
	}
	return nums[0], nums[1], nums[2], nil
}
