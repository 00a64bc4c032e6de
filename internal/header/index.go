package header

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on a sharded index, which is untrusted input like a header. The
// largest public checkpoints have around 100k tensors in a few MB of index.
// MaxIndexShards matters most: every shard is a header read upstream, so an
// index naming a million missing shards would turn one listing into a
// million requests. Real checkpoints have at most a few hundred shards;
// 10,000 is also where the @huggingface/hub client stops.
const (
	MaxIndexSize    = 64 << 20 // bytes of index JSON
	MaxIndexTensors = 1 << 20  // entries in weight_map
	MaxIndexShards  = 10_000   // distinct shard files
	maxShardPathLen = 1024
	maxShardSegLen  = 255
)

// Index is a sharded checkpoint's index (model.safetensors.index.json,
// model.safetensors.index.fp16.json, diffusion_pytorch_model.safetensors.index.json,
// ...), which maps each tensor name to the shard file holding it. Nothing in
// it is trusted beyond the checks ParseIndex makes: total_size is advisory,
// and whether a tensor really is in its shard is for the caller to see.
type Index struct {
	// Metadata is the "metadata" object (total_size, total_parameters, ...),
	// nil when absent or null. Numbers are json.Number, so no precision is
	// lost.
	Metadata map[string]any
	// WeightMap maps tensor names to shard paths relative to the index's
	// directory; every value passed ValidShardName.
	WeightMap map[string]string
}

// ParseIndex parses and validates an index file. Beyond strict JSON (the
// same reader as headers), it requires a top-level object with a
// "weight_map" object of string values, each a plain relative path (see
// ValidShardName); "metadata", when present, must be an object or null;
// other top-level keys (some repos carry a stray "dtype") are ignored.
// Repeated keys for "metadata", "weight_map" or a tensor name are refused
// rather than resolved last-wins as Python's json would. Sizes and counts are
// bounded by the Max* constants.
func ParseIndex(data []byte) (*Index, error) {
	bad := func(reason string) error { return formatErr(InvalidIndex, "", reason) }
	if len(data) > MaxIndexSize {
		return nil, bad("index larger than " + strconv.Itoa(MaxIndexSize) + " bytes")
	}
	if !utf8.Valid(data) {
		return nil, bad("invalid UTF-8 at byte " + strconv.Itoa(firstInvalidUTF8(data)))
	}
	s := &scanner{b: data, kind: InvalidIndex}
	s.ws()
	if s.peek() != '{' {
		return nil, s.fail("the index must be a JSON object")
	}
	ix := &Index{}
	var seenMeta, seenMap bool
	shards := map[string]struct{}{}
	err := s.object(func(key string) error {
		switch key {
		case "metadata":
			if seenMeta {
				return s.fail("duplicate key \"metadata\"")
			}
			seenMeta = true
			v, err := s.value(true)
			if err != nil {
				return err
			}
			switch m := v.(type) {
			case nil:
			case map[string]any:
				ix.Metadata = m
			default:
				return bad("\"metadata\" must be an object")
			}
			return nil
		case "weight_map":
			if seenMap {
				return s.fail("duplicate key \"weight_map\"")
			}
			seenMap = true
			ix.WeightMap = map[string]string{}
			return s.object(func(name string) error {
				if _, dup := ix.WeightMap[name]; dup {
					return formatErr(InvalidIndex, name, "tensor listed twice in weight_map")
				}
				if len(ix.WeightMap) >= MaxIndexTensors {
					return bad("weight_map has more than " + strconv.Itoa(MaxIndexTensors) + " entries")
				}
				if s.peek() != '"' {
					return formatErr(InvalidIndex, name, "weight_map values must be strings")
				}
				shard, err := s.str()
				if err != nil {
					return err
				}
				if why := shardNameProblem(shard); why != "" {
					return formatErr(InvalidIndex, name, "shard path "+quote(shard)+": "+why)
				}
				if _, ok := shards[shard]; !ok {
					if len(shards) >= MaxIndexShards {
						return bad("weight_map names more than " + strconv.Itoa(MaxIndexShards) +
							" distinct shard files, the most an index may list")
					}
					shards[shard] = struct{}{}
				}
				ix.WeightMap[name] = shard
				return nil
			})
		}
		return s.skip()
	})
	if err != nil {
		return nil, err
	}
	s.ws()
	if !s.eof() {
		return nil, s.fail("trailing characters")
	}
	if !seenMap {
		return nil, bad("no \"weight_map\"")
	}
	return ix, nil
}

// Shards lists the distinct shard paths, sorted: transformers'
// sorted(set(weight_map.values())).
func (ix *Index) Shards() []string {
	seen := map[string]struct{}{}
	out := []string{}
	for _, s := range ix.WeightMap {
		if _, ok := seen[s]; !ok {
			seen[s] = struct{}{}
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// TotalSize is metadata.total_size (the sum of the tensors' byte sizes, not of
// the files), when it is present and a non-negative integer. It is advisory.
func (ix *Index) TotalSize() (uint64, bool) {
	n, ok := ix.Metadata["total_size"].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	return v, err == nil
}

// ValidShardName checks a weight_map value: a non-empty relative path of at
// most 1024 bytes, '/'-separated segments of at most 255 bytes, none empty,
// "." or ".."; no leading '/', no "://", no backslash, no NUL or other
// control character. These are the rules hub.ValidPath applies to repo paths
// (this package imports nothing of hubproxy's), plus the scheme check.
func ValidShardName(name string) error {
	if why := shardNameProblem(name); why != "" {
		return formatErr(InvalidIndex, "", "shard path "+quote(name)+": "+why)
	}
	return nil
}

// shardNameProblem is why name is not a valid shard path, or "".
func shardNameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > maxShardPathLen:
		return "too long"
	case !utf8.ValidString(name):
		return "not UTF-8"
	case strings.HasPrefix(name, "/"):
		return "absolute paths are not allowed"
	case strings.Contains(name, "://"):
		return "URLs are not allowed"
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "contains a control character or backslash"
		}
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "", ".", "..":
			return "has an empty, '.' or '..' segment"
		}
		if len(seg) > maxShardSegLen {
			return "a segment is longer than 255 bytes"
		}
	}
	return ""
}
