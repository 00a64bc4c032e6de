package tensor

import (
	"context"
	"math/big"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Listing is the answer of GET /models/{repo}/tensors: every tensor of every
// file, read from headers alone.
type Listing struct {
	Repo     string        `json:"repo"`
	Revision string        `json:"revision"`
	Commit   string        `json:"commit"`
	Index    string        `json:"index,omitempty"`
	Files    []ListedFile  `json:"files"`
	Tensors  []ListedEntry `json:"tensors"`
	Totals   Totals        `json:"totals"`
}

// ListedFile describes one safetensors file.
type ListedFile struct {
	Path         string            `json:"path"`
	ETag         string            `json:"etag"`
	Size         int64             `json:"size"`
	HeaderLength uint64            `json:"header_length"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// ListedEntry is one tensor; Offset is absolute in its file.
type ListedEntry struct {
	Name   string   `json:"name"`
	DType  string   `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	File   string   `json:"file"`
	Offset uint64   `json:"offset"`
	Length uint64   `json:"length"`
}

// Totals sums a listing. Parameters count elements, whatever their width.
type Totals struct {
	Tensors           int               `json:"tensors"`
	Bytes             uint64            `json:"bytes"`
	Parameters        uint64            `json:"parameters"`
	ParametersByDType map[string]uint64 `json:"parameters_by_dtype"`
}

// List reads every header of the repo (shards concurrently) and lists them.
func (s *Service) List(ctx context.Context, auth string, repo hub.Repo, rev, file string) (*Listing, error) {
	l, err := s.Layout(ctx, auth, repo, rev, file)
	if err != nil {
		return nil, err
	}
	files, err := s.Headers(ctx, auth, repo, l)
	if err != nil {
		return nil, err
	}
	out := &Listing{
		Repo: repo.String(), Revision: rev, Commit: l.Commit, Index: l.Index,
		Files:   make([]ListedFile, 0, len(files)),
		Tensors: []ListedEntry{},
		Totals:  Totals{ParametersByDType: map[string]uint64{}},
	}
	for _, f := range files {
		h := f.Header
		out.Files = append(out.Files, ListedFile{Path: f.Path, ETag: f.ETag, Size: f.Size, HeaderLength: h.HeaderLen, Metadata: h.Metadata})
		for _, t := range h.Tensors {
			off, n := h.FileRange(t)
			out.Tensors = append(out.Tensors, ListedEntry{
				Name: t.Name, DType: string(t.DType), Shape: nonNil(t.Shape), File: f.Path, Offset: off, Length: n,
			})
			params := elements(t.Shape)
			out.Totals.Tensors++
			out.Totals.Bytes += n
			out.Totals.Parameters += params
			out.Totals.ParametersByDType[string(t.DType)] += params
		}
	}
	return out, nil
}

// elements is the product of shape. A validated header's tensors fit in
// their file, so the product fits in 64 bits for every byte-or-wider dtype;
// big.Int keeps sub-byte dtypes honest too.
func elements(shape []uint64) uint64 {
	p := big.NewInt(1)
	for _, d := range shape {
		p.Mul(p, new(big.Int).SetUint64(d))
	}
	if !p.IsUint64() {
		return ^uint64(0)
	}
	return p.Uint64()
}

func nonNil(s []uint64) []uint64 {
	if s == nil {
		return []uint64{}
	}
	return s
}
