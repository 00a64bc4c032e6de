package soak

import (
	"bytes"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

func TestParseSafetensorsReadsWhatHubtestWrites(t *testing.T) {
	a := hubtest.RandomBytes(1, 2*3*4)
	b := hubtest.RandomBytes(2, 5)
	file := hubtest.Safetensors([]hubtest.Tensor{
		{Name: "a", DType: "F32", Shape: []int64{2, 3}, Data: a},
		{Name: "b", DType: "I8", Shape: []int64{5}, Data: b},
	}, map[string]string{"format": "pt"})
	st, err := parseSafetensors(file, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tensors) != 2 || st.Meta["format"] != "pt" {
		t.Fatalf("parsed %+v", st)
	}
	if !bytes.Equal(st.bytesOf(file, st.Tensors[0]), a) || !bytes.Equal(st.bytesOf(file, st.Tensors[1]), b) {
		t.Fatal("tensor bytes differ from what was written")
	}
	if _, err := parseSafetensors(file[:len(file)-1], true); err == nil {
		t.Error("a file one byte short parsed as whole")
	}
	if _, err := parseSafetensors(file[:8], false); err == nil {
		t.Error("a header cut short parsed")
	}
}

func TestShardOf(t *testing.T) {
	// A 3x4 int8 tensor whose bytes are 0..11, row-major.
	data := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	cases := []struct {
		dim, rank, world int
		want             []byte
		shape            []int64
	}{
		{0, 0, 3, []byte{0, 1, 2, 3}, []int64{1, 4}},
		{0, 1, 2, []byte{4, 5, 6, 7, 8, 9, 10, 11}, []int64{2, 4}}, // uneven: the later rank gets the extra row
		{1, 1, 2, []byte{2, 3, 6, 7, 10, 11}, []int64{3, 2}},
		{1, 0, 3, []byte{0, 4, 8}, []int64{3, 1}},
		{1, 2, 3, []byte{2, 3, 6, 7, 10, 11}, []int64{3, 2}},
	}
	for _, c := range cases {
		got, shape, err := shardOf(data, "I8", []int64{3, 4}, c.dim, c.rank, c.world)
		if err != nil || !bytes.Equal(got, c.want) || shapeHeader(shape) != shapeHeader(c.shape) {
			t.Errorf("shard %d:%d/%d = %v %v %v, want %v %v", c.dim, c.rank, c.world, got, shape, err, c.want, c.shape)
		}
	}
	if got, _, _ := shardOf(hubtest.RandomBytes(3, 16), "BF16", []int64{2, 4}, 1, 0, 2); len(got) != 8 {
		t.Errorf("BF16 column shard has %d bytes, want 8", len(got))
	}
	if _, _, err := shardOf(data, "F4", []int64{24}, 0, 0, 2); err == nil {
		t.Error("a sub-byte dtype sharded")
	}
}
