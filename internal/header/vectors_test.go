package header

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// vector is one test vector of docs/safetensors.md §6, named v<NN>_<what>.
type vector struct {
	name   string
	file   []byte
	want   ErrorKind // 0: accepted
	tensor string    // the tensor the error must name, if any
	check  func(t *testing.T, h *Header)
}

const hdr23 = `{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}` // 60 bytes

func wantTensors(want ...Tensor) func(*testing.T, *Header) {
	return func(t *testing.T, h *Header) {
		t.Helper()
		if !reflect.DeepEqual(h.Tensors, want) {
			t.Fatalf("tensors = %+v\nwant %+v", h.Tensors, want)
		}
	}
}

func wantEmpty(n uint64, meta map[string]string) func(*testing.T, *Header) {
	return func(t *testing.T, h *Header) {
		t.Helper()
		if len(h.Tensors) != 0 || h.HeaderLen != n || h.DataStart != 8+n {
			t.Fatalf("header = %+v, want N=%d and no tensors", h, n)
		}
		if !reflect.DeepEqual(h.Metadata, meta) {
			t.Fatalf("metadata = %#v, want %#v", h.Metadata, meta)
		}
	}
}

func vectors() []vector {
	valid23 := file(hdr23, 16)
	nested := func(arrays int) string {
		return obj(`"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"x":` +
			strings.Repeat("[", arrays) + strings.Repeat("]", arrays) + `}`)
	}
	all := []string{}
	var off uint64
	var allWant []Tensor
	for _, d := range DTypes() {
		shape := u(1)
		switch d {
		case F4:
			shape = u(2)
		case F6E2M3, F6E3M2:
			shape = u(4)
		}
		w, _ := d.Bits()
		n := shape[0] * uint64(w) / 8
		name := "t_" + string(d)
		all = append(all, tj(name, d, shape, off, off+n))
		allWant = append(allWant, Tensor{Name: name, DType: d, Shape: shape, Begin: off, End: off + n})
		off += n
	}
	huge := []string{}
	const h61 = 1<<61 - 1
	for i := uint64(0); i < 8; i++ {
		huge = append(huge, tj(fmt.Sprintf("h%d", i), U8, u(h61), i*h61, (i+1)*h61))
	}
	weights := []string{}
	for i := 0; i < 10; i++ {
		weights = append(weights, tj(fmt.Sprintf("weight_%d", i), F32, u(2, 2), 0, 16))
	}
	return []vector{
		{name: "v01_test_header_too_small", file: nil, want: HeaderTooSmall},
		{name: "v02_seven_zero_bytes", file: make([]byte, 7), want: HeaderTooSmall},
		{name: "v03_n0_eight_bytes", file: rawFile(0, nil), want: InvalidHeaderDeserialization},
		{name: "v04_test_header_too_large",
			file: append([]byte{0x3C, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF}, append([]byte(hdr23), make([]byte, 16)...)...),
			want: HeaderTooLarge},
		{name: "v05_n_100000001", file: append([]byte{0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0}, "{}"...), want: HeaderTooLarge},
		// v06 (N = 100,000,000 accepted) is TestVectorMaxHeaderInclusive.
		{name: "v07_n_100000000_truncated", file: rawFile(100_000_000, []byte("{}")), want: InvalidHeaderLength},
		{name: "v08_test_invalid_header_length", file: rawFile(60, nil), want: InvalidHeaderLength},
		{name: "v09_test_truncated_header_is_rejected", file: valid23[:8+60/2], want: InvalidHeaderLength},
		{name: "v10_test_invalid_header_non_utf8", file: rawFile(1, []byte{0xFF}), want: InvalidHeader},
		{name: "v11_overlong_utf8", file: rawFile(8, []byte("{\"\xC0\xAF\":1}")), want: InvalidHeader},
		{name: "v12_test_invalid_header_not_json", file: file("{", 0), want: InvalidHeaderDeserialization},
		{name: "v13_test_whitespace_padded_header", file: file("{}\r \t\n", 0), check: wantEmpty(6, nil)},
		{name: "v14_test_whitespace_leading_padded_header", file: file("\t\n{}\r ", 0), check: wantEmpty(6, nil)},
		{name: "v15_nul_padding", file: file("{}\x00\x00\x00\x00\x00\x00", 0), want: InvalidHeaderDeserialization},
		{name: "v16_bom", file: file("\xEF\xBB\xBF{}", 0), want: InvalidHeaderDeserialization},
		{name: "v17_all_spaces", file: file("        ", 0), want: InvalidHeaderDeserialization},
		{name: "v18_array", file: file("[]", 0), want: InvalidHeaderDeserialization},
		{name: "v18_null", file: file("null", 0), want: InvalidHeaderDeserialization},
		{name: "v19_two_objects", file: file("{}{}", 0), want: InvalidHeaderDeserialization},
		{name: "v19_trailing_x", file: file("{} x", 0), want: InvalidHeaderDeserialization},
		{name: "v20_test_empty", file: []byte("\x08\x00\x00\x00\x00\x00\x00\x00{}      "), check: wantEmpty(8, nil)},
		{name: "v21_test_empty_with_metadata", file: file(`{"__metadata__":{"framework":"pt"}}     `, 0),
			check: wantEmpty(40, map[string]string{"framework": "pt"})},
		{name: "v22_empty_with_data", file: file("{}", 4), want: MetadataIncompleteBuffer},
		{name: "v23_test_deserialization", file: valid23,
			check: wantTensors(Tensor{Name: "test", DType: I32, Shape: u(2, 2), Begin: 0, End: 16})},
		{name: "v24_test_deserialization_metadata",
			file: file(`{"__metadata__":{"framework":"pt"},"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}       `, 16),
			check: func(t *testing.T, h *Header) {
				if h.HeaderLen != 102 || h.Metadata["framework"] != "pt" || len(h.Tensors) != 1 {
					t.Fatalf("got %+v", h)
				}
			}},
		{name: "v25_test_serialization", file: file(hdr23+"    ", 16), check: func(t *testing.T, h *Header) {
			if h.HeaderLen != 64 || h.DataStart%8 != 0 {
				t.Fatalf("got N=%d DataStart=%d", h.HeaderLen, h.DataStart)
			}
		}},
		{name: "v26_test_serialization_forces_alignment",
			file: file(`{"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},"test2":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]}}      `, 24),
			check: func(t *testing.T, h *Header) {
				wantTensors(Tensor{Name: "test1", DType: I32, Shape: u(2, 2), Begin: 0, End: 16},
					Tensor{Name: "test2", DType: F16, Shape: u(2, 2), Begin: 16, End: 24})(t, h)
				if h.DataStart != 136 {
					t.Fatalf("DataStart = %d, want 136", h.DataStart)
				}
				if off, n := h.FileRange(h.Tensors[1]); off != 152 || n != 8 {
					t.Fatalf("FileRange(test2) = %d,%d, want 152,8", off, n)
				}
			}},
		{name: "v27_test_metadata_incomplete_buffer_polyglot",
			file: append(file(hdr23, 16), "extra_bogus_data_for_polyglot_file"...), want: MetadataIncompleteBuffer},
		{name: "v28_test_metadata_incomplete_buffer_short", file: file(hdr23, 14), want: MetadataIncompleteBuffer},
		{name: "v29_test_data_offset_overflow_is_rejected",
			file: file(`{"liar":{"dtype":"F32","shape":[1024,1024],"data_offsets":[0,4194304]}}`, 1), want: MetadataIncompleteBuffer},
		// The reference names whichever tensor its HashMap yields second; we
		// sort ties by name, so it is always weight_1.
		{name: "v30_test_json_attack", file: file(obj(weights...), 16), want: InvalidOffset, tensor: "weight_1"},
		{name: "v31_gap", file: file(obj(tj("a", U8, u(4), 0, 4), tj("b", U8, u(4), 8, 12)), 12),
			want: InvalidOffset, tensor: "b"},
		{name: "v32_overlap", file: file(obj(tj("a", U8, u(8), 0, 8), tj("b", U8, u(8), 4, 12)), 12),
			want: InvalidOffset, tensor: "b"},
		{name: "v33_not_from_zero", file: file(obj(tj("a", U8, u(4), 4, 8)), 8), want: InvalidOffset, tensor: "a"},
		{name: "v34_end_before_begin", file: file(obj(tj("a", U8, u(4), 0, 4), tj("b", U8, u(0), 4, 0)), 4),
			want: InvalidOffset, tensor: "b"},
		{name: "v35_out_of_order", file: file(obj(tj("b", U8, u(4), 4, 8), tj("a", F32, u(1), 0, 4)), 8),
			check: wantTensors(Tensor{Name: "a", DType: F32, Shape: u(1), Begin: 0, End: 4},
				Tensor{Name: "b", DType: U8, Shape: u(4), Begin: 4, End: 8})},
		{name: "v36_test_invalid_info", file: file(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}}`, 0),
			want: TensorInvalidInfo, tensor: "test"},
		{name: "v37_test_empty_shapes_allowed", file: file(`{"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}`, 4),
			check: wantTensors(Tensor{Name: "test", DType: I32, Shape: u(), Begin: 0, End: 4})},
		{name: "v38_scalar_zero_bytes", file: file(`{"test":{"dtype":"I32","shape":[],"data_offsets":[0,0]}}`, 0),
			want: TensorInvalidInfo},
		{name: "v39_test_zero_sized_tensor", file: file(`{"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}}`, 0),
			check: wantTensors(Tensor{Name: "test", DType: I32, Shape: u(2, 0), Begin: 0, End: 0})},
		{name: "v40_zero_sized_with_bytes", file: file(obj(tj("z", I32, u(2, 0), 0, 4)), 4), want: TensorInvalidInfo},
		{name: "v41_test_multiple_zero_sized",
			file: file(obj(tj("z1", F32, u(0), 0, 0), tj("z2", F32, u(3, 0), 0, 0), tj("c", U8, u(4), 0, 4)), 4),
			check: wantTensors(Tensor{Name: "z1", DType: F32, Shape: u(0)}, Tensor{Name: "z2", DType: F32, Shape: u(3, 0)},
				Tensor{Name: "c", DType: U8, Shape: u(4), End: 4})},
		{name: "v42_zero_sized_inside_other", file: file(obj(tj("c", U8, u(4), 0, 4), tj("z", F32, u(0), 2, 2)), 4),
			want: InvalidOffset, tensor: "z"},
		{name: "v43_test_validation_overflow_product",
			file: file(`{"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}`, 16), want: ValidationOverflow},
		{name: "v44_test_validation_overflow_bits",
			file: file(`{"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}}`, 16), want: ValidationOverflow},
		{name: "v45_u8_2pow61", file: file(obj(tj("a", U8, u(1<<61), 0, 4)), 4), want: ValidationOverflow},
		{name: "v46_overflow_before_zero", file: file(obj(tj("a", U8, u(1<<32, 1<<32, 0), 0, 0)), 0), want: ValidationOverflow},
		{name: "v47_zero_before_overflow", file: file(obj(tj("a", U8, u(0, 1<<32, 1<<32), 0, 0)), 0),
			check: wantTensors(Tensor{Name: "a", DType: U8, Shape: u(0, 1<<32, 1<<32)})},
		{name: "v48_test_serialization_fp4", file: file(`{"attn.0":{"dtype":"F4","shape":[1,2],"data_offsets":[0,1]}}    `, 1),
			check: wantTensors(Tensor{Name: "attn.0", DType: F4, Shape: u(1, 2), End: 1})},
		{name: "v49_f4_odd", file: file(obj(tj("a", F4, u(3), 0, 2)), 2), want: MisalignedSlice, tensor: "a"},
		{name: "v50_f4_wrong_bytes", file: file(obj(tj("a", F4, u(4), 0, 4)), 4), want: TensorInvalidInfo},
		{name: "v51_f6_e2m3_ok", file: file(obj(tj("a", F6E2M3, u(4), 0, 3)), 3),
			check: wantTensors(Tensor{Name: "a", DType: F6E2M3, Shape: u(4), End: 3})},
		{name: "v51_f6_e3m2_misaligned", file: file(obj(tj("a", F6E3M2, u(2), 0, 2)), 2), want: MisalignedSlice},
		{name: "v52_all_22_dtypes", file: file(obj(all...), 67), check: func(t *testing.T, h *Header) {
			if len(allWant) != 22 || off != 67 {
				t.Fatalf("test setup: %d dtypes, %d bytes", len(allWant), off)
			}
			wantTensors(allWant...)(t, h)
		}},
		{name: "v53_lowercase_dtype", file: file(`{"a":{"dtype":"u8","shape":[4],"data_offsets":[0,4]}}`, 4),
			want: InvalidHeaderDeserialization},
		{name: "v53_f8_e4m3fn", file: file(`{"a":{"dtype":"F8_E4M3FN","shape":[4],"data_offsets":[0,4]}}`, 4),
			want: InvalidHeaderDeserialization},
		{name: "v54_metadata_only", file: file(`{"__metadata__":{"format":"pt"}}`, 0),
			check: wantEmpty(32, map[string]string{"format": "pt"})},
		{name: "v54_metadata_null", file: file(`{"__metadata__":null}`, 0), check: wantEmpty(21, nil)},
		{name: "v55_metadata_number", file: file(`{"__metadata__":{"a":1}}`, 0), want: InvalidHeaderDeserialization},
		{name: "v56_duplicate_metadata", file: file(`{"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}}`, 0),
			want: InvalidHeaderDeserialization},
		// Deviation: the reference keeps the last "a" (and then, with D=4,
		// reports MetadataIncompleteBuffer); we refuse repeated names.
		{name: "v57_duplicate_tensor_deviation",
			file: file(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, 8),
			want: DuplicateTensor, tensor: "a"},
		{name: "v57_duplicate_tensor_short_deviation",
			file: file(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, 4),
			want: DuplicateTensor, tensor: "a"},
		{name: "v58_duplicate_field", file: file(`{"a":{"dtype":"U8","dtype":"I8","shape":[4],"data_offsets":[0,4]}}`, 4),
			want: InvalidHeaderDeserialization},
		{name: "v59_unknown_field_ignored", file: file(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"extra":{"x":[1,2]}}}`, 4),
			check: wantTensors(Tensor{Name: "a", DType: U8, Shape: u(4), End: 4})},
		{name: "v60_missing_dtype", file: file(`{"a":{"shape":[4],"data_offsets":[0,4]}}`, 4), want: InvalidHeaderDeserialization},
		{name: "v60_uppercase_field", file: file(`{"a":{"DTYPE":"U8","shape":[4],"data_offsets":[0,4]}}`, 4),
			want: InvalidHeaderDeserialization},
		{name: "v62_array_form", file: file(`{"a":["U8",[4],[0,4]]}`, 4),
			check: wantTensors(Tensor{Name: "a", DType: U8, Shape: u(4), End: 4})},
		{name: "v62_dtype_enum_form", file: file(`{"a":{"dtype":{"U8":null},"shape":[4],"data_offsets":[0,4]}}`, 4),
			check: wantTensors(Tensor{Name: "a", DType: U8, Shape: u(4), End: 4})},
		{name: "v63_depth_127_accepted", file: file(nested(125), 4),
			check: wantTensors(Tensor{Name: "a", DType: U8, Shape: u(4), End: 4})},
		{name: "v63_depth_128_rejected", file: file(nested(126), 4), want: InvalidHeaderDeserialization},
		{name: "v64_lone_surrogate_name", file: file(`{"\ud800":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 4),
			want: InvalidHeaderDeserialization},
		{name: "v64_raw_control_in_name", file: file("{\"a\x01\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
			want: InvalidHeaderDeserialization},
		{name: "v65_empty_and_nul_names",
			file: file(`{"":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a\u0000":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}`, 8),
			check: wantTensors(Tensor{Name: "", DType: U8, Shape: u(4), End: 4},
				Tensor{Name: "a\x00", DType: U8, Shape: u(4), Begin: 4, End: 8})},
		{name: "v66_first_bad_tensor_wins",
			file: file(obj(tj("a", U8, u(4), 0, 4), tj("b", I32, u(4), 4, 8), tj("c", U8, u(4), 12, 16)), 16),
			want: TensorInvalidInfo, tensor: "b"},
		{name: "v67_offsets_wrap", file: file(obj(huge...), 0), want: MetadataIncompleteBuffer},
	}
}

// v61 is a family of bad numbers and arrays in shape and data_offsets.
func vector61() []vector {
	var vs []vector
	for i, c := range []struct{ shape, offsets string }{
		{`[4]`, `[0,4,8]`},
		{`[4]`, `[4]`},
		{`[4]`, `[0.0,4.0]`},
		{`[4]`, `[0,4e0]`},
		{`[4]`, `[-0,0]`},
		{`[-4]`, `[0,4]`},
		{`[04]`, `[0,4]`},
		{`null`, `[0,4]`},
		{`[18446744073709551616]`, `[0,4]`},
	} {
		h := `{"a":{"dtype":"U8","shape":` + c.shape + `,"data_offsets":` + c.offsets + `}}`
		vs = append(vs, vector{name: fmt.Sprintf("v61_bad_numbers_%d", i), file: file(h, 4), want: InvalidHeaderDeserialization})
	}
	return vs
}

func TestVectors(t *testing.T) {
	for _, v := range append(vectors(), vector61()...) {
		t.Run(v.name, func(t *testing.T) {
			h, err := parseBytes(v.file)
			checkErr(t, err, v.want, v.tensor)
			if err == nil {
				if v.check != nil {
					v.check(t, h)
				}
				checkInvariants(t, h, uint64(len(v.file)))
			}
		})
	}
}

// spacesFile is a lazily generated file: an 8-byte prefix n, then "{}", then
// spaces up to size bytes, so the 100 MB vector needs no 100 MB fixture.
type spacesFile struct{ n, size int64 }

func (f spacesFile) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		o := off + int64(i)
		switch {
		case o >= f.size:
			return i, io.EOF
		case o < 8:
			p[i] = byte(uint64(f.n) >> (8 * o))
		case o == 8:
			p[i] = '{'
		case o == 9:
			p[i] = '}'
		default:
			p[i] = ' '
		}
	}
	return len(p), nil
}

// TestVectorMaxHeaderInclusive is v06: N = 100,000,000 is accepted.
func TestVectorMaxHeaderInclusive(t *testing.T) {
	const n = 100_000_000
	h, err := Parse(spacesFile{n, 8 + n}, 8+n, Options{})
	checkErr(t, err, 0, "")
	if h.HeaderLen != n || len(h.Tensors) != 0 {
		t.Fatalf("got %+v", h)
	}
	// One byte more is HeaderTooLarge even with the bytes present.
	_, err = Parse(spacesFile{n + 1, 9 + n}, 9+n, Options{})
	checkErr(t, err, HeaderTooLarge, "")
}

// Parse must read only the header, never the data buffer.
func TestParseReadsOnlyHeader(t *testing.T) {
	b := file(hdr23, 16)
	r := &limitReader{data: b, limit: 8 + len(hdr23)}
	if _, err := Parse(r, int64(len(b)), Options{}); err != nil {
		t.Fatal(err)
	}
	if r.max > int64(8+len(hdr23)) {
		t.Fatalf("read up to byte %d, header ends at %d", r.max, 8+len(hdr23))
	}
	if r.calls != 2 {
		t.Fatalf("%d reads, want 2 (prefix, header)", r.calls)
	}
}

// limitReader serves data[:limit] only, recording how far it was read.
type limitReader struct {
	data     []byte
	limit    int
	max      int64
	calls    int
	failWith error
}

func (r *limitReader) ReadAt(p []byte, off int64) (int, error) {
	r.calls++
	if end := off + int64(len(p)); end > r.max {
		r.max = end
	}
	if r.failWith != nil {
		return 0, r.failWith
	}
	if off >= int64(r.limit) {
		return 0, io.EOF
	}
	n := copy(p, r.data[off:r.limit])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

var _ io.ReaderAt = (*limitReader)(nil)
