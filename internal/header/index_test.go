package header

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// transformersIndex is what save_pretrained writes (indent=2, sort_keys).
const transformersIndex = `{
  "metadata": {
    "total_parameters": 1235814400,
    "total_size": 2471628800
  },
  "weight_map": {
    "lm_head.weight": "model-00002-of-00002.safetensors",
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.layers.0.mlp.down_proj.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors"
  }
}
`

func TestParseIndex(t *testing.T) {
	ix, err := ParseIndex([]byte(transformersIndex))
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.Shards(); !reflect.DeepEqual(got, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
		t.Fatalf("Shards = %v", got)
	}
	if n, ok := ix.TotalSize(); !ok || n != 2471628800 {
		t.Fatalf("TotalSize = %d, %v", n, ok)
	}
	if ix.Metadata["total_parameters"] != json.Number("1235814400") {
		t.Fatalf("metadata = %#v", ix.Metadata)
	}
	if len(ix.WeightMap) != 4 || ix.WeightMap["lm_head.weight"] != "model-00002-of-00002.safetensors" {
		t.Fatalf("weight_map = %v", ix.WeightMap)
	}
}

func TestParseIndexVariants(t *testing.T) {
	for _, c := range []struct {
		name, json string
		shards     []string
		total      bool
	}{
		{"no_metadata", `{"weight_map":{"a":"x.safetensors"}}`, []string{"x.safetensors"}, false},
		{"null_metadata", `{"metadata":null,"weight_map":{"a":"x.safetensors"}}`, []string{"x.safetensors"}, false},
		{"stray_dtype_key", `{"dtype":"bfloat16","metadata":{"total_size":4},"weight_map":{"a":"x.safetensors"}}`,
			[]string{"x.safetensors"}, true},
		{"variant_names", `{"metadata":{},"weight_map":{"a":"model.fp16-00001-of-00002.safetensors","b":"model.fp16-00002-of-00002.safetensors"}}`,
			[]string{"model.fp16-00001-of-00002.safetensors", "model.fp16-00002-of-00002.safetensors"}, false},
		{"subdirectory", `{"weight_map":{"a":"unet/diffusion_pytorch_model-00001-of-00002.safetensors"}}`,
			[]string{"unet/diffusion_pytorch_model-00001-of-00002.safetensors"}, false},
		{"empty_weight_map", `{"weight_map":{}}`, []string{}, false},
		{"total_size_float_is_advisory", `{"metadata":{"total_size":1.5},"weight_map":{"a":"x"}}`, []string{"x"}, false},
		{"whitespace", " \n{ \"weight_map\" : { \"a\" : \"x\" } }\n", []string{"x"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ix, err := ParseIndex([]byte(c.json))
			if err != nil {
				t.Fatal(err)
			}
			if got := ix.Shards(); !reflect.DeepEqual(got, c.shards) {
				t.Fatalf("Shards = %v, want %v", got, c.shards)
			}
			if _, ok := ix.TotalSize(); ok != c.total {
				t.Fatalf("TotalSize ok = %v", ok)
			}
		})
	}
}

func TestParseIndexRejects(t *testing.T) {
	wm := func(shard string) string { return `{"weight_map":{"a":` + shard + `}}` }
	for _, c := range []struct{ name, json string }{
		{"empty", ``},
		{"not_object", `[]`},
		{"no_weight_map", `{"metadata":{}}`},
		{"weight_map_array", `{"weight_map":[]}`},
		{"weight_map_null", `{"weight_map":null}`},
		{"value_number", wm(`1`)},
		{"value_null", wm(`null`)},
		{"value_object", wm(`{}`)},
		{"duplicate_tensor", `{"weight_map":{"a":"x","a":"y"}}`},
		{"duplicate_weight_map", `{"weight_map":{"a":"x"},"weight_map":{"b":"y"}}`},
		{"duplicate_metadata", `{"metadata":{},"metadata":{},"weight_map":{}}`},
		{"metadata_array", `{"metadata":[],"weight_map":{}}`},
		{"metadata_string", `{"metadata":"x","weight_map":{}}`},
		{"trailing", `{"weight_map":{}} {}`},
		{"bom", "\xEF\xBB\xBF" + `{"weight_map":{}}`},
		{"bad_utf8", "{\"weight_map\":{\"a\":\"\xff\"}}"},
		{"trailing_comma", `{"weight_map":{"a":"x",}}`},
		{"nan", `{"metadata":{"total_size":NaN},"weight_map":{}}`},
		{"too_deep", `{"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"weight_map":{}}`},
		{"shard_empty", wm(`""`)},
		{"shard_dotdot", wm(`"../secret.safetensors"`)},
		{"shard_dotdot_inner", wm(`"a/../../b.safetensors"`)},
		{"shard_dot", wm(`"./a.safetensors"`)},
		{"shard_absolute", wm(`"/etc/passwd"`)},
		{"shard_url", wm(`"https://evil.example/x.safetensors"`)},
		{"shard_scheme_relative", wm(`"a://b"`)},
		{"shard_backslash", wm(`"a\\b.safetensors"`)},
		{"shard_nul", wm(`"a\u0000.safetensors"`)},
		{"shard_control", wm(`"a\n.safetensors"`)},
		{"shard_double_slash", wm(`"a//b.safetensors"`)},
		{"shard_trailing_slash", wm(`"a/"`)},
		{"shard_too_long", wm(`"` + strings.Repeat("a/", 600) + `x"`)},
		{"shard_segment_too_long", wm(`"` + strings.Repeat("a", 256) + `"`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseIndex([]byte(c.json))
			checkErr(t, err, InvalidIndex, "")
		})
	}
}

func TestParseIndexLimits(t *testing.T) {
	big := make([]byte, MaxIndexSize+1)
	_, err := ParseIndex(big)
	checkErr(t, err, InvalidIndex, "")
}

// shardsIndex is an index of n tensors, each in a shard of its own.
func shardsIndex(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"weight_map":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"t` + strconv.Itoa(i) + `":"s` + strconv.Itoa(i) + `"`)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// TestParseIndexShardLimit pins the shard limit at 10,000 distinct files:
// each shard costs a header read upstream, so the limit bounds what one
// listing can ask of the upstream.
func TestParseIndexShardLimit(t *testing.T) {
	if MaxIndexShards != 10_000 {
		t.Fatalf("MaxIndexShards = %d, want 10000", MaxIndexShards)
	}
	ix, err := ParseIndex(shardsIndex(MaxIndexShards))
	if err != nil {
		t.Fatalf("an index of exactly %d shards: %v", MaxIndexShards, err)
	}
	if n := len(ix.Shards()); n != MaxIndexShards {
		t.Fatalf("%d shards, want %d", n, MaxIndexShards)
	}
	_, err = ParseIndex(shardsIndex(MaxIndexShards + 1))
	checkErr(t, err, InvalidIndex, "")
	if !strings.Contains(err.Error(), "more than 10000 distinct shard files") {
		t.Fatalf("error %q does not name the limit", err)
	}
	// Many tensors in few shards are not limited by the shard count.
	var b strings.Builder
	b.WriteString(`{"weight_map":{`)
	for i := range 2 * MaxIndexShards {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"t` + strconv.Itoa(i) + `":"s` + strconv.Itoa(i%3) + `"`)
	}
	b.WriteString(`}}`)
	if _, err := ParseIndex([]byte(b.String())); err != nil {
		t.Fatalf("20,000 tensors in 3 shards: %v", err)
	}
}

func TestValidShardName(t *testing.T) {
	for _, ok := range []string{"model.safetensors", "a/b/c.safetensors", "model-00001-of-00002.safetensors", "é.safetensors", "a b?#.safetensors"} {
		if err := ValidShardName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "..", ".", "a/..", "/a", "a\\b", "a\x00", "a\x7f", "http://x", "a//b", "a/"} {
		checkErr(t, ValidShardName(bad), InvalidIndex, "")
	}
}
