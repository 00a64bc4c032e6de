package header

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestJSONRules covers the step-5 rules of docs/safetensors.md §2 beyond the
// numbered vectors: what serde_json accepts and refuses, and where Go's
// encoding/json would differ (§7).
func TestJSONRules(t *testing.T) {
	const a4 = `"dtype":"U8","shape":[4],"data_offsets":[0,4]`
	ok := func(h string) (string, int, ErrorKind) { return h, 4, 0 }
	bad := func(h string) (string, int, ErrorKind) { return h, 4, InvalidHeaderDeserialization }
	info := func(h string) (string, int, ErrorKind) { return h, 4, TensorInvalidInfo }
	for _, c := range []struct {
		name string
		f    func(string) (string, int, ErrorKind)
		json string
	}{
		// Syntax.
		{"trailing_comma_object", bad, `{"a":{` + a4 + `},}`},
		{"trailing_comma_array", bad, `{"a":{"dtype":"U8","shape":[4,],"data_offsets":[0,4]}}`},
		{"comment", bad, `{/*x*/"a":{` + a4 + `}}`},
		{"single_quotes", bad, `{'a':{` + a4 + `}}`},
		{"unquoted_key", bad, `{a:{` + a4 + `}}`},
		{"missing_colon", bad, `{"a" {` + a4 + `}}`},
		{"raw_tab_in_string", bad, "{\"a\t\":{" + a4 + "}}"},
		{"raw_newline_in_metadata", bad, "{\"__metadata__\":{\"k\":\"a\nb\"}}"},
		{"invalid_escape", bad, `{"a\x":{` + a4 + `}}`},
		{"bad_hex_digit", bad, `{"a\u00g0":{` + a4 + `}}`},
		{"unterminated_string", bad, `{"a`},
		{"unterminated_escaped_string", bad, `{"a\n`},
		{"backslash_at_end", bad, `{"a\`},
		{"short_unicode_escape", bad, `{"a\u00":{` + a4 + `}}`},
		{"lone_low_surrogate", bad, `{"\udc00":{` + a4 + `}}`},
		{"high_surrogate_then_letter", bad, `{"\ud800\u0041":{` + a4 + `}}`},
		{"high_surrogate_then_text", bad, `{"\ud800x":{` + a4 + `}}`},
		{"surrogate_pair", ok, `{"\ud83d\ude00":{` + a4 + `}}`},
		{"escapes_all", ok, `{"\"\\\/\b\f\n\r\t\u00e9":{` + a4 + `}}`},
		{"whitespace_everywhere", ok, " {\n\"a\" :\t{ \"dtype\" : \"U8\" , \"shape\" : [ 4 ] , \"data_offsets\" : [ 0 , 4 ] } } "},
		{"nbsp_is_not_whitespace", bad, "{\u00a0\"a\":{" + a4 + "}}"},
		{"bad_literal", bad, `{"a":{` + a4 + `,"x":nul}}`},
		{"true_literal_ignored", ok, `{"a":{` + a4 + `,"x":[true,false,null]}}`},
		// Numbers in ignored fields are still checked as serde_json does.
		{"unknown_negative", ok, `{"a":{` + a4 + `,"x":-5}}`},
		{"unknown_huge_int", ok, `{"a":{` + a4 + `,"x":123456789012345678901234567890}}`},
		{"unknown_float_underflow", ok, `{"a":{` + a4 + `,"x":1e-400}}`},
		{"unknown_zero_huge_exp", ok, `{"a":{` + a4 + `,"x":0e999999999999}}`},
		{"unknown_float_overflow", bad, `{"a":{` + a4 + `,"x":1e400}}`},
		{"unknown_int_overflows_float", bad, `{"a":{` + a4 + `,"x":1` + strings.Repeat("0", 400) + `}}`},
		{"unknown_leading_zero", bad, `{"a":{` + a4 + `,"x":01}}`},
		{"unknown_bare_minus", bad, `{"a":{` + a4 + `,"x":-}}`},
		{"unknown_dot", bad, `{"a":{` + a4 + `,"x":1.}}`},
		{"unknown_plus", bad, `{"a":{` + a4 + `,"x":+1}}`},
		{"unknown_lone_surrogate", bad, `{"a":{` + a4 + `,"x":"\ud800"}}`},
		// Metadata.
		{"metadata_nested_object", bad, `{"__metadata__":{"a":{}}}`},
		{"metadata_null_value", bad, `{"__metadata__":{"a":null}}`},
		{"metadata_array", bad, `{"__metadata__":[]}`},
		{"metadata_string", bad, `{"__metadata__":"x"}`},
		{"metadata_null_then_dup", bad, `{"__metadata__":null,"__metadata__":{}}`},
		{"metadata_anywhere", ok, `{"a":{` + a4 + `},"__metadata__":{"k":"v"}}`},
		{"metadata_escaped_key", ok, `{"__metadata\u005f_":{"k":"v"},"a":{` + a4 + `}}`},
		{"metadata_uppercase_is_tensor", bad, `{"__METADATA__":{"k":"v"}}`},
		{"metadata_as_tensor", bad, `{"__metadata__":{` + a4 + `}}`},
		// Tensor entries.
		{"tensor_number", bad, `{"a":5}`},
		{"tensor_null", bad, `{"a":null}`},
		{"tensor_string", bad, `{"a":"U8"}`},
		{"tensor_empty_object", bad, `{"a":{}}`},
		{"missing_shape", bad, `{"a":{"dtype":"U8","data_offsets":[0,4]}}`},
		{"missing_offsets", bad, `{"a":{"dtype":"U8","shape":[4]}}`},
		{"field_order_free", ok, `{"a":{"data_offsets":[0,4],"shape":[4],"dtype":"U8"}}`},
		{"duplicate_shape", bad, `{"a":{"dtype":"U8","shape":[4],"shape":[4],"data_offsets":[0,4]}}`},
		{"escaped_field_name", ok, `{"a":{"d\u0074ype":"U8","shape":[4],"data_offsets":[0,4]}}`},
		{"shape_object", bad, `{"a":{"dtype":"U8","shape":{},"data_offsets":[0,4]}}`},
		{"shape_string", bad, `{"a":{"dtype":"U8","shape":"4","data_offsets":[0,4]}}`},
		{"shape_bool", bad, `{"a":{"dtype":"U8","shape":[true],"data_offsets":[0,4]}}`},
		{"shape_nested", bad, `{"a":{"dtype":"U8","shape":[[4]],"data_offsets":[0,4]}}`},
		{"offsets_object", bad, `{"a":{"dtype":"U8","shape":[4],"data_offsets":{"0":0,"1":4}}}`},
		{"offsets_string", bad, `{"a":{"dtype":"U8","shape":[4],"data_offsets":"0,4"}}`},
		{"offsets_null", bad, `{"a":{"dtype":"U8","shape":[4],"data_offsets":null}}`},
		{"offsets_empty", bad, `{"a":{"dtype":"U8","shape":[4],"data_offsets":[]}}`},
		{"offset_max_u64_parses", info, `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,18446744073709551615]}}`},
		{"dtype_number", bad, `{"a":{"dtype":8,"shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_null", bad, `{"a":{"dtype":null,"shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_enum_empty_array", bad, `{"a":{"dtype":{"U8":[]},"shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_enum_empty_object", bad, `{"a":{"dtype":{"U8":{}},"shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_enum_two_keys", bad, `{"a":{"dtype":{"U8":null,"I8":null},"shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_enum_no_keys", bad, `{"a":{"dtype":{},"shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_enum_unknown", bad, `{"a":{"dtype":{"X":null},"shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_c128", bad, `{"a":{"dtype":"C128","shape":[4],"data_offsets":[0,4]}}`},
		{"dtype_escaped", ok, `{"a":{"dtype":"\u0055\u0038","shape":[4],"data_offsets":[0,4]}}`},
		{"array_form_2", bad, `{"a":["U8",[4]]}`},
		{"array_form_4", bad, `{"a":["U8",[4],[0,4],1]}`},
		{"array_form_empty", bad, `{"a":[]}`},
		{"array_form_enum_dtype", ok, `{"a":[{"U8":null},[4],[0,4]]}`},
		{"unknown_field_deep_object", ok, `{"a":{` + a4 + `,"x":{"y":{"z":[{}]}}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, d, want := c.f(c.json)
			b := file(h, d)
			got, err := parseBytes(b)
			checkErr(t, err, want, "")
			if err == nil {
				checkInvariants(t, got, uint64(len(b)))
			}
		})
	}
}

func TestDecodedNames(t *testing.T) {
	h, err := parseBytes(file(`{"a\u0062":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},`+
		`"__metadata__":{"k":"1","k":"2","\u00e9":"\ud83d\ude00"}}`, 4))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Lookup("ab"); !ok {
		t.Fatal(`"a\u0062" not found as "ab"`)
	}
	if _, ok := h.Lookup("a\\u0062"); ok {
		t.Fatal("escaped name kept raw")
	}
	// A repeated key inside __metadata__: last wins, as in the reference.
	if h.Metadata["k"] != "2" || h.Metadata["é"] != "😀" {
		t.Fatalf("metadata = %q", h.Metadata)
	}
}

// Repeated names are refused only once the whole JSON has parsed: a JSON
// error anywhere still reports InvalidHeaderDeserialization, as the reference.
func TestLookup(t *testing.T) {
	h, err := parseBytes(file(obj(tj("a", U8, u(4), 0, 4), tj("b", U8, u(2), 4, 6)), 6))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Lookup("c"); ok {
		t.Fatal("found a missing tensor")
	}
	// A hand-built Header (no index) falls back to a scan.
	hand := &Header{Tensors: h.Tensors}
	if tn, ok := hand.Lookup("b"); !ok || tn.Begin != 4 {
		t.Fatalf("hand-built Lookup = %+v, %v", tn, ok)
	}
	if _, ok := hand.Lookup("c"); ok {
		t.Fatal("hand-built: found a missing tensor")
	}
	if (Tensor{Begin: 5, End: 3}).Len() != 0 {
		t.Fatal("Len of an inverted tensor")
	}
}

func TestDuplicateAfterJSON(t *testing.T) {
	const a = `"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}`
	_, err := parseBytes(file(`{`+a+`,`+a+`,"b":{"dtype":"X","shape":[],"data_offsets":[4,4]}}`, 4))
	checkErr(t, err, InvalidHeaderDeserialization, "")
	// ... and before any offset check: the duplicate pair here also overlaps.
	_, err = parseBytes(file(`{`+a+`,"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},`+a+`}`, 4))
	checkErr(t, err, DuplicateTensor, "a")
}

func TestOptionsLimit(t *testing.T) {
	b := file(hdr23, 16)
	for _, c := range []struct {
		limit uint64
		want  ErrorKind
	}{
		{0, 0},
		{60, 0},
		{59, HeaderLimitExceeded},
		{MaxHeaderSize + 1, 0}, // above the reference cap: the cap applies
	} {
		_, err := Parse(strings.NewReader(string(b)), int64(len(b)), Options{MaxHeaderSize: c.limit})
		checkErr(t, err, c.want, "")
	}
	// The reference cap is checked first, and HeaderTooLarge stays distinct.
	_, err := HeaderLen(rawFile(MaxHeaderSize+1, nil), Options{MaxHeaderSize: 10})
	checkErr(t, err, HeaderTooLarge, "")
	_, err = HeaderLen(rawFile(11, nil), Options{MaxHeaderSize: 10})
	checkErr(t, err, HeaderLimitExceeded, "")
}

// MaxTensors refuses a header with one tensor too many as soon as the entry
// past the cap is met: even a JSON error after it is not reached, which shows
// the rest of the text was never decoded.
func TestOptionsMaxTensors(t *testing.T) {
	var entries []string
	for i := range 5 {
		entries = append(entries, tj(fmt.Sprintf("t%d", i), "U8", u(1), uint64(i), uint64(i+1)))
	}
	b := file(obj(entries...), 5)
	for _, c := range []struct {
		limit int
		want  ErrorKind
	}{{0, 0}, {5, 0}, {6, 0}, {4, HeaderLimitExceeded}, {1, HeaderLimitExceeded}} {
		_, err := Parse(bytes.NewReader(b), int64(len(b)), Options{MaxTensors: c.limit})
		checkErr(t, err, c.want, "")
	}
	broken := file(obj(append(entries[:2:2], `"bad":`)...), 2)
	_, err := Parse(bytes.NewReader(broken), int64(len(broken)), Options{MaxTensors: 2})
	checkErr(t, err, HeaderLimitExceeded, "")
	if !strings.Contains(err.Error(), "more than 2 tensors") {
		t.Errorf("message %q does not say what the limit is", err)
	}
}

func TestHeaderLen(t *testing.T) {
	n, err := HeaderLen(append(rawFile(60, nil), "ignored"...), Options{})
	if err != nil || n != 60 {
		t.Fatalf("HeaderLen = %d, %v", n, err)
	}
	_, err = HeaderLen([]byte{1, 2, 3}, Options{})
	checkErr(t, err, HeaderTooSmall, "")
	n, err = HeaderLen(rawFile(MaxHeaderSize, nil), Options{})
	if err != nil || n != MaxHeaderSize {
		t.Fatalf("HeaderLen(max) = %d, %v", n, err)
	}
	_, err = HeaderLen([]byte{0x3C, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF}, Options{})
	checkErr(t, err, HeaderTooLarge, "")
}

func TestParseSizeAndReadErrors(t *testing.T) {
	b := file(hdr23, 16)
	_, err := Parse(strings.NewReader(string(b)), -1, Options{})
	checkErr(t, err, MetadataIncompleteBuffer, "")

	// A size larger than the real file: the header is read, the coverage
	// check fails.
	_, err = Parse(strings.NewReader(string(b)), int64(len(b))+1, Options{})
	checkErr(t, err, MetadataIncompleteBuffer, "")

	// The reader holds fewer bytes than size claims: an I/O error, not a
	// format error.
	r := &limitReader{data: b, limit: 20}
	_, err = Parse(r, int64(len(b)), Options{})
	var fe *FormatError
	if !errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &fe) {
		t.Fatalf("short reader: %v", err)
	}
	boom := errors.New("boom")
	_, err = Parse(&limitReader{data: b, limit: len(b), failWith: boom}, int64(len(b)), Options{})
	if !errors.Is(err, boom) {
		t.Fatalf("failing reader: %v", err)
	}
	// A buffer holding just 8+N bytes is enough: the data is never read.
	h, err := Parse(&limitReader{data: b, limit: 8 + len(hdr23)}, int64(len(b)), Options{})
	if err != nil || len(h.Tensors) != 1 {
		t.Fatalf("prefix-only reader: %v", err)
	}
}

func TestErrorMessages(t *testing.T) {
	long := strings.Repeat("é", 200) + "\x00"
	err := &FormatError{Kind: InvalidOffset, Tensor: long, Reason: "r"}
	msg := err.Error()
	if !strings.HasPrefix(msg, `safetensors: tensor "ééé`) || !strings.Contains(msg, `"…: invalid offset: r`) {
		t.Fatalf("message = %q", msg)
	}
	if len(msg) > 200 {
		t.Fatalf("message not truncated: %d bytes", len(msg))
	}
	if !strings.Contains((&FormatError{Kind: InvalidSlice, Tensor: "a\x00\n"}).Error(), `"a\x00\n"`) {
		t.Fatal("control characters not escaped")
	}
	for k := HeaderTooSmall; k <= InvalidIndex; k++ {
		if strings.HasPrefix(k.String(), "ErrorKind(") || !strings.HasPrefix(k.Error(), "safetensors: ") {
			t.Fatalf("kind %d: %q %q", int(k), k.String(), k.Error())
		}
	}
	if ErrorKind(99).String() != "ErrorKind(99)" {
		t.Fatal(ErrorKind(99).String())
	}
	if errors.Is(err, InvalidSlice) || !errors.Is(err, InvalidOffset) {
		t.Fatal("errors.Is by kind")
	}
	// A JSON error says where, in file offsets.
	_, jerr := parseBytes(file(`{"a":x}`, 0))
	if !strings.Contains(jerr.Error(), "at byte 13") {
		t.Fatalf("JSON error = %v", jerr)
	}
	_, uerr := parseBytes(file("{\"\xff\"}", 0))
	if !strings.Contains(uerr.Error(), "at byte 10") {
		t.Fatalf("UTF-8 error = %v", uerr)
	}
}

func TestDTypes(t *testing.T) {
	want := map[DType]int{BOOL: 8, F4: 4, F6E2M3: 6, F6E3M2: 6, U8: 8, I8: 8, F8E5M2: 8, F8E4M3: 8, F8E8M0: 8,
		F8E4M3FNUZ: 8, F8E5M2FNUZ: 8, I16: 16, U16: 16, F16: 16, BF16: 16, I32: 32, U32: 32, F32: 32,
		C64: 64, F64: 64, I64: 64, U64: 64}
	all := DTypes()
	if len(all) != 22 || len(want) != 22 {
		t.Fatalf("%d dtypes", len(all))
	}
	for _, d := range all {
		if b, ok := d.Bits(); !ok || b != want[d] {
			t.Fatalf("%s.Bits() = %d, %v; want %d", d, b, ok, want[d])
		}
	}
	for _, d := range []DType{"", "f32", "C128", "F8_E4M3FN", "I4", "F32 "} {
		if _, ok := d.Bits(); ok {
			t.Fatalf("%q is not a dtype", d)
		}
	}
}

// TestEdgeCases covers the rows of docs/safetensors.md §2 "Edge cases, stated
// exactly" that no numbered vector pins down.
func TestEdgeCases(t *testing.T) {
	for _, c := range []struct {
		name   string
		file   []byte
		want   ErrorKind
		tensor string
	}{
		{"f4_scalar", file(obj(tj("s", F4, u(), 0, 1)), 1), MisalignedSlice, "s"},
		{"max_dim_then_zero", file(obj(tj("a", U8, u(18446744073709551615, 0), 0, 0)), 0), 0, ""},
		{"u8_2pow61_minus1_wrong_offsets", file(obj(tj("a", U8, u(1<<61-1), 0, 4)), 4), TensorInvalidInfo, "a"},
		{"zero_sized_between", file(obj(tj("a", U8, u(2), 0, 2), tj("z", F32, u(0, 5), 2, 2), tj("b", U8, u(2), 2, 4)), 4), 0, ""},
		{"zero_sized_at_end", file(obj(tj("a", U8, u(2), 0, 2), tj("z", F32, u(0), 2, 2)), 2), 0, ""},
		{"zero_sized_only", file(obj(tj("z", F32, u(0), 0, 0)), 0), 0, ""},
		{"zero_sized_past_end", file(obj(tj("a", U8, u(2), 0, 2), tj("z", F32, u(0), 3, 3)), 2), InvalidOffset, "z"},
		{"shared_range", file(obj(tj("a", U8, u(2), 0, 2), tj("b", U8, u(2), 0, 2)), 2), InvalidOffset, "b"},
		{"first_error_in_offset_order", file(obj(tj("z", U8, u(3), 2, 4), tj("a", U8, u(2), 0, 2)), 4), TensorInvalidInfo, "z"},
		{"offset_error_before_size_error", file(obj(tj("a", U8, u(1<<61), 1, 2)), 2), InvalidOffset, "a"},
		{"size_error_before_coverage", file(obj(tj("a", U8, u(3), 0, 2)), 100), TensorInvalidInfo, "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := parseBytes(c.file)
			checkErr(t, err, c.want, c.tensor)
			if err == nil {
				checkInvariants(t, h, uint64(len(c.file)))
			}
		})
	}
}
