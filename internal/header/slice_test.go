package header

import (
	"reflect"
	"strings"
	"testing"
)

// tensor builds a consistent tensor at offset 0.
func tensor(dt DType, shape ...uint64) Tensor {
	w, _ := dt.Bits()
	n := uint64(w)
	for _, d := range shape {
		n *= d
	}
	return Tensor{Name: "t", DType: dt, Shape: u(shape...), End: n / 8}
}

func br(pairs ...uint64) []ByteRange {
	var rs []ByteRange
	for i := 0; i+1 < len(pairs); i += 2 {
		rs = append(rs, ByteRange{pairs[i], pairs[i+1] - pairs[i]})
	}
	return rs
}

// TestSliceExamples is the example table of docs/safetensors.md §5 (slice.rs
// tests and probes) plus the v68 vectors; results are [begin,end) pairs.
func TestSliceExamples(t *testing.T) {
	all := Dim{0, End}
	at := func(i uint64) Dim { return Dim{i, i + 1} }
	for _, c := range []struct {
		name   string
		t      Tensor
		dims   []Dim
		ranges []ByteRange
		shape  []uint64
		err    ErrorKind
	}{
		{"s123_0to1", tensor(F32, 1, 2, 3), []Dim{{0, 1}}, br(0, 24), u(1, 2, 3), 0},
		{"s123_all_0to1", tensor(F32, 1, 2, 3), []Dim{all, {0, 1}}, br(0, 12), u(1, 1, 3), 0},
		{"s123_all_all_0to1", tensor(F32, 1, 2, 3), []Dim{all, all, {0, 1}}, br(0, 4, 12, 16), u(1, 2, 1), 0},
		{"s123_all_1to2_0to1", tensor(F32, 1, 2, 3), []Dim{all, {1, 2}, {0, 1}}, br(12, 16), u(1, 1, 1), 0},
		{"s23_all_1to3", tensor(F32, 2, 3), []Dim{all, {1, 3}}, br(4, 12, 16, 24), u(2, 2), 0},
		{"s23_1_1to3", tensor(F32, 2, 3), []Dim{at(1), {1, 3}}, br(16, 24), u(1, 2), 0},
		{"s23_1to2_0", tensor(F32, 2, 3), []Dim{{1, 2}, at(0)}, br(12, 16), u(1, 1), 0},
		{"s43_1to3", tensor(F32, 4, 3), []Dim{{1, 3}}, br(12, 36), u(2, 3), 0},
		{"s234_all_1", tensor(F32, 2, 3, 4), []Dim{all, at(1)}, br(16, 32, 64, 80), u(2, 1, 4), 0},
		{"s234_0to1_1to3", tensor(F32, 2, 3, 4), []Dim{{0, 1}, {1, 3}}, br(16, 48), u(1, 2, 4), 0},
		{"f4_24_all_0to2", tensor(F4, 2, 4), []Dim{all, {0, 2}}, br(0, 1, 2, 3), u(2, 2), 0},
		{"f4_24_all_1to2", tensor(F4, 2, 4), []Dim{all, {1, 2}}, nil, nil, MisalignedSlice},
		{"f6_8_4to8", tensor(F6E2M3, 8), []Dim{{4, 8}}, br(3, 6), u(4), 0},
		{"f6_8_2to6", tensor(F6E2M3, 8), []Dim{{2, 6}}, nil, nil, MisalignedSlice},
		{"s43_columns", tensor(F32, 4, 3), []Dim{all, {0, 2}}, br(0, 8, 12, 20, 24, 32, 36, 44), u(4, 2), 0},
		{"whole_nil", tensor(F32, 4, 3), nil, br(0, 48), u(4, 3), 0},
		{"whole_explicit", tensor(F32, 4, 3), []Dim{{0, 4}, {0, End}}, br(0, 48), u(4, 3), 0},
		{"scalar", tensor(I32), nil, br(0, 4), u(), 0},
		// v68: slice.rs test_invalid_range, test_fp4_misaligned, Python [:20].
		{"v68_test_invalid_range", tensor(F32, 2, 3), []Dim{at(1), {1, 4}}, nil, nil, SliceOutOfRange},
		{"v68_too_many_slices", tensor(F32, 2, 3), []Dim{at(1), at(1), at(1)}, nil, nil, TooManySlices},
		{"v68_scalar_any_slice", tensor(F32), []Dim{all}, nil, nil, TooManySlices},
		{"v68_test_fp4_misaligned", tensor(F4, 1, 2), []Dim{all, {0, 1}}, nil, nil, MisalignedSlice},
		{"v68_numpy_slice_20_of_10", tensor(F32, 10, 5), []Dim{{0, 20}}, nil, nil, SliceOutOfRange},
		// The reference's bugs (§5), fixed.
		{"start_after_stop_no_panic", tensor(F32, 4, 3), []Dim{{2, 1}}, nil, nil, InvalidSlice},
		{"empty_outer_is_empty", tensor(F32, 4, 3), []Dim{{0, 0}, {0, 2}}, nil, u(0, 2), 0},
		{"empty_at_end", tensor(F32, 4, 3), []Dim{{4, 4}}, nil, u(0, 3), 0},
		{"zero_dim_whole", tensor(F32, 0, 3), []Dim{all, all}, nil, u(0, 3), 0},
		{"zero_dim_inner", tensor(F32, 3, 0), []Dim{{1, 2}}, nil, u(1, 0), 0},
		{"start_past_zero_dim", tensor(F32, 0, 3), []Dim{{1, 1}}, nil, nil, SliceOutOfRange},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, shape, err := c.t.Slice(c.dims)
			if c.err != 0 {
				checkErr(t, err, c.err, "t")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalRanges(rs, c.ranges) || !reflect.DeepEqual(shape, c.shape) {
				t.Fatalf("got %v %v, want %v %v", rs, shape, c.ranges, c.shape)
			}
		})
	}
}

// TestContiguityRule checks the reference's rule (docs/safetensors.md §5): one
// range iff every dimension before the innermost partial one selects a
// single index, against the brute-force oracle, for every slice of a few
// small shapes.
func TestContiguityRule(t *testing.T) {
	for _, shape := range [][]uint64{{3}, {2, 3}, {3, 1, 2}, {2, 2, 2, 2}, {1, 4}} {
		for _, dt := range []DType{U8, BF16, F4} {
			tn := tensor(dt, shape...)
			if w, _ := dt.Bits(); tn.End*8 != prodU(shape)*uint64(w) {
				continue
			}
			forEachSlice(shape, func(dims []Dim) {
				got, gotShape, err := tn.Slice(dims)
				want, wantShape, wantErr := oracleSlice(tn, dims)
				if wantErr != 0 {
					if err == nil {
						t.Fatalf("%s%v %v: no error, want %s", dt, shape, dims, wantErr.String())
					}
					return
				}
				if err != nil || !equalRanges(got, want) || !reflect.DeepEqual(gotShape, wantShape) {
					t.Fatalf("%s%v %v: got %v %v %v, want %v %v", dt, shape, dims, got, gotShape, err, want, wantShape)
				}
				j := -1
				for i := range shape {
					if dims[i].Start != 0 || dims[i].Stop != shape[i] {
						j = i
					}
				}
				single := true
				for i := 0; i < j; i++ {
					single = single && dims[i].Stop-dims[i].Start == 1
				}
				if empty := prodU(wantShape) == 0; !empty && single != (len(got) == 1) {
					t.Fatalf("%s%v %v: %d ranges, rule says contiguous=%v", dt, shape, dims, len(got), single)
				}
			})
		}
	}
}

// forEachSlice calls f with every [a,b) per dimension, 0 ≤ a ≤ b ≤ d.
func forEachSlice(shape []uint64, f func([]Dim)) {
	dims := make([]Dim, len(shape))
	var rec func(i int)
	rec = func(i int) {
		if i == len(shape) {
			f(append([]Dim(nil), dims...))
			return
		}
		for a := uint64(0); a <= shape[i]; a++ {
			for b := a; b <= shape[i]; b++ {
				dims[i] = Dim{a, b}
				rec(i + 1)
			}
		}
	}
	rec(0)
}

func prodU(s []uint64) uint64 {
	p := uint64(1)
	for _, d := range s {
		p *= d
	}
	return p
}

func TestShard(t *testing.T) {
	rows := tensor(F32, 10, 4) // 16-byte rows
	var sizes []uint64
	var next uint64
	for rank := 0; rank < 3; rank++ {
		rs, shape, err := rows.Shard(0, rank, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Off != next {
			t.Fatalf("rank %d: %v, want one range at %d", rank, rs, next)
		}
		next += rs[0].Len
		sizes = append(sizes, shape[0])
	}
	if !reflect.DeepEqual(sizes, []uint64{3, 3, 4}) || next != rows.Len() {
		t.Fatalf("10 rows over 3 ranks: %v covering %d bytes", sizes, next)
	}

	// Column shard: strided ranges, one per row, row-major.
	rs, shape, err := rows.Shard(1, 1, 2)
	if err != nil || !reflect.DeepEqual(shape, u(10, 2)) || len(rs) != 10 {
		t.Fatalf("column shard: %v %v %v", rs, shape, err)
	}
	for i, r := range rs {
		if r != (ByteRange{uint64(i)*16 + 8, 8}) {
			t.Fatalf("column shard range %d = %+v", i, r)
		}
	}

	// More ranks than rows: some ranks get nothing, but all are valid.
	small := tensor(U8, 2, 3)
	var got []uint64
	for rank := 0; rank < 4; rank++ {
		rs, shape, err := small.Shard(0, rank, 4)
		if err != nil {
			t.Fatal(err)
		}
		if (shape[0] == 0) != (len(rs) == 0) {
			t.Fatalf("rank %d: shape %v with %d ranges", rank, shape, len(rs))
		}
		got = append(got, shape[0])
	}
	if !reflect.DeepEqual(got, []uint64{0, 1, 0, 1}) {
		t.Fatalf("2 rows over 4 ranks: %v", got)
	}

	// A huge dimension does not overflow size×rank: rank 2 of 3 over 2^63
	// starts at floor(2^64/3).
	huge := Tensor{Name: "t", DType: U8, Shape: u(1<<63, 0)}
	_, shape, err = huge.Shard(0, 2, 3)
	if want := uint64(1<<63 - 6148914691236517205); err != nil || shape[0] != want {
		t.Fatalf("huge shard: %v %v, want %d", shape, err, want)
	}

	for _, c := range []struct{ dim, rank, world int }{
		{0, 0, 0}, {0, -1, 2}, {0, 2, 2}, {2, 0, 1}, {-1, 0, 1},
	} {
		_, _, err := rows.Shard(c.dim, c.rank, c.world)
		checkErr(t, err, InvalidShard, "t")
	}
	_, _, err = tensor(F32).Shard(0, 0, 1)
	checkErr(t, err, InvalidShard, "t")
	_, _, err = tensor(F4, 2, 3).Shard(1, 0, 2)
	checkErr(t, err, MisalignedSlice, "t")
}

func TestSliceRefusesInconsistentTensor(t *testing.T) {
	for _, tn := range []Tensor{
		{Name: "t", DType: "X", Shape: u(2), End: 2},
		{Name: "t", DType: U8, Shape: u(2), End: 3},
		{Name: "t", DType: U8, Shape: u(2), Begin: 5, End: 3},
		{Name: "t", DType: F4, Shape: u(3), End: 2},
		{Name: "t", DType: U64, Shape: u(1 << 62), End: 0},
	} {
		_, _, err := tn.Slice(nil)
		if err == nil {
			t.Fatalf("%+v: no error", tn)
		}
	}
}

func TestTooManyRanges(t *testing.T) {
	tn := tensor(U8, MaxRanges+1, 2)
	_, _, err := tn.Slice([]Dim{{0, End}, {0, 1}})
	checkErr(t, err, TooManyRanges, "t")
	// Exactly MaxRanges is fine, and a row slice of the same tensor is one range.
	rs, _, err := tn.Slice([]Dim{{1, MaxRanges + 1}, {0, 1}})
	if err != nil || len(rs) != MaxRanges {
		t.Fatalf("%d ranges, %v", len(rs), err)
	}
	rs, _, err = tn.Slice([]Dim{{1, MaxRanges + 1}})
	if err != nil || len(rs) != 1 {
		t.Fatalf("%v, %v", rs, err)
	}
	// A huge but empty slice costs nothing.
	empty := Tensor{Name: "t", DType: U8, Shape: u(1<<40, 1<<20, 0)}
	rs, shape, err := empty.Slice([]Dim{{0, End}, {0, 1}})
	if err != nil || len(rs) != 0 || !reflect.DeepEqual(shape, u(1<<40, 1, 0)) {
		t.Fatalf("%v %v %v", rs, shape, err)
	}
}

func TestParseSliceSpec(t *testing.T) {
	for _, c := range []struct {
		spec string
		want []Dim
	}{
		{"", nil},
		{"  ", nil},
		{"0:10,:,5:7", []Dim{{0, 10}, {0, End}, {5, 7}}},
		{"3", []Dim{{3, 4}}},
		{" 1 : 2 , 4: ", []Dim{{1, 2}, {4, End}}},
		{":5", []Dim{{0, 5}}},
		{"::", []Dim{{0, End}}},
		{"1:3:1", []Dim{{1, 3}}},
		{"2:2", []Dim{{2, 2}}},
	} {
		got, err := ParseSliceSpec(c.spec)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseSliceSpec(%q) = %v, %v; want %v", c.spec, got, err, c.want)
		}
	}
	for _, spec := range []string{
		"-1", "0:-1", "1:3:2", "::-1", "a", "1:b", "1,,2", "1:2:3:4", "3:1", "+1",
		"1_000", "0x10", "18446744073709551615", "0:18446744073709551615", "99999999999999999999",
		",", "[0:1]", "0;1",
		func() string {
			return "0" + strings.Repeat(",0", MaxSpecDims)
		}(),
	} {
		_, err := ParseSliceSpec(spec)
		checkErr(t, err, InvalidSlice, "")
	}
}

func TestParseShardSpec(t *testing.T) {
	d, r, w, err := ParseShardSpec("1:3/8")
	if err != nil || d != 1 || r != 3 || w != 8 {
		t.Fatalf("1:3/8 = %d %d %d %v", d, r, w, err)
	}
	d, r, w, err = ParseShardSpec("0:0/1")
	if err != nil || d != 0 || r != 0 || w != 1 {
		t.Fatalf("0:0/1 = %d %d %d %v", d, r, w, err)
	}
	for _, spec := range []string{
		"", "1", "1:3", "1/3", "1:3/", ":3/8", "1:/8", "1:8/8", "1:9/8", "1:0/0", "-1:0/1", "1:-1/2",
		"1:+1/2", "a:0/1", " 1:0/1", "1:0/1 ", "1:0/99999999999", "1:0/2/3", "1:2:0/3",
	} {
		_, _, _, err := ParseShardSpec(spec)
		checkErr(t, err, InvalidShard, "")
	}
}
