package header

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the current output")

// TestGolden parses each testdata/golden/*.json header (wrapped into a file
// whose data buffer is as long as the largest data_offsets end says) and
// compares a full listing, including the shards of 2-D tensors, with the
// matching .golden file. Run with -update after an intended change.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			h, err := parseBytes(file(string(text), int(dataLen(t, text))))
			got := listing(h, err)
			goldenPath := strings.TrimSuffix(in, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("listing differs from %s:\n--- got\n%s\n--- want\n%s", goldenPath, got, want)
			}
		})
	}
}

// dataLen is the largest data_offsets end in a header, read loosely with
// encoding/json (object or array form), independently of the parser.
func dataLen(t *testing.T, text []byte) uint64 {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(text, &entries); err != nil {
		t.Fatalf("golden input is not JSON: %v", err)
	}
	var max uint64
	for name, raw := range entries {
		if name == "__metadata__" {
			continue
		}
		var obj struct {
			DataOffsets []uint64 `json:"data_offsets"`
		}
		var arr []json.RawMessage
		var off []uint64
		if json.Unmarshal(raw, &obj) == nil {
			off = obj.DataOffsets
		} else if json.Unmarshal(raw, &arr) == nil && len(arr) == 3 {
			_ = json.Unmarshal(arr[2], &off)
		}
		if len(off) == 2 && off[1] > max {
			max = off[1]
		}
	}
	return max
}

// listing renders a parse result for the golden files.
func listing(h *Header, err error) string {
	var b strings.Builder
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			fmt.Fprintf(&b, "error kind=%s tensor=%q\n", fe.Kind.String(), fe.Tensor)
		}
		fmt.Fprintf(&b, "message: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "N=%d data_start=%d file_size=%d tensors=%d\n", h.HeaderLen, h.DataStart, h.FileSize, len(h.Tensors))
	if h.Metadata == nil {
		b.WriteString("metadata: none\n")
	} else {
		keys := make([]string, 0, len(h.Metadata))
		for k := range h.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "metadata: %d keys\n", len(keys))
		for _, k := range keys {
			fmt.Fprintf(&b, "  %q = %q\n", k, h.Metadata[k])
		}
	}
	for _, tn := range h.Tensors {
		off, n := h.FileRange(tn)
		fmt.Fprintf(&b, "%s %s %v data=[%d,%d) file=[%d,%d) len=%d\n",
			tn.Name, tn.DType, tn.Shape, tn.Begin, tn.End, off, off+n, n)
		if len(tn.Shape) != 2 {
			continue
		}
		for dim := 0; dim < 2; dim++ {
			for rank := 0; rank < 2; rank++ {
				rs, shape, err := tn.Shard(dim, rank, 2)
				fmt.Fprintf(&b, "  shard %d:%d/2 -> %s\n", dim, rank, summary(rs, shape, err))
			}
		}
	}
	return b.String()
}

func summary(rs []ByteRange, shape []uint64, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var total uint64
	for _, r := range rs {
		total += r.Len
	}
	s := fmt.Sprintf("shape %v, %d bytes in %d ranges", shape, total, len(rs))
	if len(rs) > 0 {
		f, l := rs[0], rs[len(rs)-1]
		s += fmt.Sprintf(", first [%d,%d) last [%d,%d)", f.Off, f.Off+f.Len, l.Off, l.Off+l.Len)
	}
	return s
}
