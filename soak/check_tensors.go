package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// expectTensor is the bytes and shape a tensor op asks for at commit c.
func expectTensor(op *op, c *commitFix) ([]byte, []int64, *tensorFix, error) {
	t := c.tensors[op.tensor]
	if t == nil {
		return nil, nil, nil, fmt.Errorf("commit %s has no tensor %q", c.id, op.tensor)
	}
	data := c.tensorBytes(t)
	if op.kind != opShard {
		return data, t.shape, t, nil
	}
	out, shape, err := shardOf(data, t.dtype, t.shape, op.shard[0], op.shard[1], op.shard[2])
	return out, shape, t, err
}

// checkTensor judges an allowed answer to a tensor or shard request.
func (o *oracle) checkTensor(r *result) judgement {
	op := r.op
	if r.status == http.StatusNotFound && r.header.Get("X-Error-Code") == "EntryNotFound" {
		return o.entryNotFound(r, func(c *commitFix) bool { return c.tensors[op.tensor] != nil })
	}
	c, j := o.namedCommit(r, r.header.Get("X-Repo-Commit"))
	if j.out == outViolation {
		return j
	}
	want, shape, t, err := expectTensor(op, c)
	if err != nil {
		return violation("status", "%d: %v", r.status, err)
	}
	switch {
	case r.header.Get("X-Tensor-Dtype") != t.dtype:
		return violation("wrong-bytes", "X-Tensor-Dtype %q, want %q", r.header.Get("X-Tensor-Dtype"), t.dtype)
	case r.header.Get("X-Tensor-Shape") != shapeHeader(shape):
		return violation("wrong-bytes", "X-Tensor-Shape %q, want %q", r.header.Get("X-Tensor-Shape"), shapeHeader(shape))
	}
	blob := c.files[t.file]
	switch {
	case !op.tRange && r.status == http.StatusOK:
		return withStale(j, o.checkBody(r, blob, want))
	case op.tRange && r.status == http.StatusPartialContent:
		a, b, ok := op.span(int64(len(want)))
		cr := fmt.Sprintf("bytes %d-%d/%d", a, b, len(want))
		if !ok || r.header.Get("Content-Range") != cr {
			return violation("wrong-bytes", "Content-Range %q for %s of a %d-byte tensor, want %q", r.header.Get("Content-Range"), op.rangeHeader(), len(want), cr)
		}
		return withStale(j, o.checkBody(r, blob, want[a:b+1]))
	case op.tRange && r.status == http.StatusRequestedRangeNotSatisfiable:
		if _, _, ok := op.span(int64(len(want))); ok {
			return violation("status", "416 for %s of a %d-byte tensor", op.rangeHeader(), len(want))
		}
		return j
	}
	return violation("status", "%d %s for %s", r.status, r.header.Get("X-Error-Code"), op)
}

// subsetNames is the tensors a subset request selects at c.
func subsetNames(op *op, c *commitFix) []string {
	var out []string
	for _, n := range c.names {
		if slices.Contains(op.names, n) || op.prefix != "" && strings.HasPrefix(n, op.prefix) {
			out = append(out, n)
		}
	}
	return out
}

// checkSubset judges an allowed answer to /safetensors?name=…&prefix=…: a
// valid safetensors file holding exactly the selected tensors' bytes.
func (o *oracle) checkSubset(r *result) judgement {
	op := r.op
	if r.status == http.StatusNotFound && r.header.Get("X-Error-Code") == "EntryNotFound" {
		return o.entryNotFound(r, func(c *commitFix) bool { return len(subsetNames(op, c)) > 0 })
	}
	c, j := o.namedCommit(r, r.header.Get("X-Repo-Commit"))
	if j.out == outViolation {
		return j
	}
	if r.status != http.StatusOK {
		return violation("status", "%d %s for %s", r.status, r.header.Get("X-Error-Code"), op)
	}
	if bodyCut(r) {
		return unavailable("body cut short")
	}
	st, err := parseSafetensors(r.body, true)
	if err != nil {
		return violation("wrong-bytes", "subset file: %v", err)
	}
	names := subsetNames(op, c)
	var got []string
	for _, t := range st.Tensors {
		got = append(got, t.Name)
		want := c.tensors[t.Name]
		switch {
		case want == nil:
			return violation("wrong-bytes", "subset holds %q, which %s does not", t.Name, c.id)
		case t.DType != want.dtype || !slices.Equal(t.Shape, want.shape):
			return violation("wrong-bytes", "subset's %q is %s%v, want %s%v", t.Name, t.DType, t.Shape, want.dtype, want.shape)
		case !bytes.Equal(st.bytesOf(r.body, t), c.tensorBytes(want)):
			return violation("wrong-bytes", "subset's %q bytes differ from the file's", t.Name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		return violation("wrong-bytes", "subset holds %v, want %v", got, names)
	}
	return j
}

// listing is the tensor API's listing, as much of it as the oracle checks.
type listing struct {
	Commit string `json:"commit"`
	Files  []struct {
		Path string `json:"path"`
		ETag string `json:"etag"`
		Size int64  `json:"size"`
	} `json:"files"`
	Tensors []struct {
		Name   string  `json:"name"`
		DType  string  `json:"dtype"`
		Shape  []int64 `json:"shape"`
		File   string  `json:"file"`
		Offset int64   `json:"offset"`
		Length int64   `json:"length"`
	} `json:"tensors"`
}

// checkListing judges an allowed answer to /models/{repo}/tensors: every
// tensor of the commit it names, each where the file has it.
func (o *oracle) checkListing(r *result) judgement {
	if r.status != http.StatusOK {
		return violation("status", "%d %s for a listing", r.status, r.header.Get("X-Error-Code"))
	}
	if bodyCut(r) {
		return unavailable("body cut short")
	}
	var l listing
	if err := json.Unmarshal(r.body, &l); err != nil {
		return violation("wrong-bytes", "listing: %v", err)
	}
	c, j := o.namedCommit(r, l.Commit)
	if j.out == outViolation {
		return j
	}
	for _, f := range l.Files {
		b := c.files[f.Path]
		if b == nil || b.etag != f.ETag || b.size() != f.Size {
			return violation("wrong-bytes", "listing names file %s (%s, %d bytes), which %s does not hold so", f.Path, f.ETag, f.Size, c.id)
		}
	}
	var got []string
	for _, t := range l.Tensors {
		want := c.tensors[t.Name]
		if want == nil || want.dtype != t.DType || !slices.Equal(want.shape, t.Shape) || want.file != t.File ||
			want.off != t.Offset || want.n != t.Length {
			return violation("wrong-bytes", "listing entry %+v differs from the file (%+v)", t, want)
		}
		got = append(got, t.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, c.names) {
		return violation("wrong-bytes", "listing has %d tensors, the commit %d", len(got), len(c.names))
	}
	return j
}
