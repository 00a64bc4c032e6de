package tensor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// Part says how much of a tensor to read: all of it (the zero value), one
// tensor-parallel rank's shard ("dim:rank/world"), or a slice ("0:8,:").
// The specs are taken as callers wrote them and validated here.
type Part struct {
	Shard string
	Slice string
}

// SpecError is a shard, slice or selection a caller got wrong: the request,
// not the file, is at fault.
type SpecError struct{ Msg string }

func (e *SpecError) Error() string { return e.Msg }

// Bytes is an opened run of repo bytes laid end to end: one tensor, part of
// one, or a whole subset file. Close it to release the files it reads.
type Bytes struct {
	*Assembly
	Commit string
	// ETag is a strong validator of the derived content: a hash of what it
	// is derived from (file ETags are content hashes, so this is one too).
	ETag  string
	blobs []Blob
}

// Close releases the files the bytes are read from.
func (b *Bytes) Close() error {
	var errs []error
	for _, bl := range b.blobs {
		errs = append(errs, bl.Close())
	}
	return errors.Join(errs...)
}

// Opened is one tensor, or a part of it, ready to read.
type Opened struct {
	Bytes
	Tensor header.Tensor
	Shape  []uint64 // of the part read
	File   string   // the safetensors file holding it
}

// OpenTensor opens tensor name of f.Repo at f.Rev for caller c (f.Path,
// when set, names the safetensors file or index to use), or the part of it
// p selects.
func (s *Service) OpenTensor(ctx context.Context, c hub.Caller, f hub.FileRef, name string, p Part) (*Opened, error) {
	if p.Shard != "" && p.Slice != "" {
		return nil, &SpecError{"use either shard or slice, not both"}
	}
	hf, t, err := s.Locate(ctx, c, f, name)
	if err != nil {
		return nil, err
	}
	ranges, shape, err := part(t, p)
	if err != nil {
		return nil, err
	}
	blob, err := s.files.open(ctx, c, hub.FileRef{Repo: f.Repo, Rev: hf.Commit, Path: hf.Path})
	if err != nil {
		return nil, err
	}
	return &Opened{
		Bytes: Bytes{
			Assembly: NewAssembly(nil, TensorPieces(hf, t, ranges, blob), s.opts.Merge, s.opts.BlockSize),
			Commit:   hf.Commit,
			ETag:     strongETag(hf.ETag, name, p.Shard, p.Slice),
			blobs:    []Blob{blob},
		},
		Tensor: t, Shape: shape, File: hf.Path,
	}, nil
}

// part lays out the byte ranges and shape of the part p of t.
func part(t header.Tensor, p Part) ([]header.ByteRange, []uint64, error) {
	switch {
	case p.Shard != "":
		dim, rank, world, err := header.ParseShardSpec(p.Shard)
		if err != nil {
			return nil, nil, &SpecError{"shard " + strconv.Quote(p.Shard) + ": " + err.Error()}
		}
		ranges, shape, err := t.Shard(dim, rank, world)
		if err != nil {
			return nil, nil, &SpecError{"shard " + strconv.Quote(p.Shard) + " of " + t.Name + ": " + err.Error()}
		}
		return ranges, shape, nil
	case p.Slice != "":
		dims, err := header.ParseSliceSpec(p.Slice)
		if err != nil {
			return nil, nil, &SpecError{"slice " + strconv.Quote(p.Slice) + ": " + err.Error()}
		}
		ranges, shape, err := t.Slice(dims)
		if err != nil {
			return nil, nil, &SpecError{"slice " + strconv.Quote(p.Slice) + " of " + t.Name + ": " + err.Error()}
		}
		return ranges, shape, nil
	}
	return []header.ByteRange{{Off: 0, Len: t.Len()}}, t.Shape, nil
}

// OpenSubset opens a safetensors file holding just the tensors of the
// layout f gives (see Layout) whose names are in names or start with one of
// prefixes, in file and offset order.
func (s *Service) OpenSubset(ctx context.Context, c hub.Caller, f hub.FileRef, names, prefixes []string) (*Bytes, error) {
	if len(names) == 0 && len(prefixes) == 0 {
		return nil, &SpecError{"name or prefix is required (repeat either to select more)"}
	}
	sel, err := s.openSelection(ctx, c, f, names, prefixes, Part{})
	if err != nil {
		return nil, err
	}
	ts := make([]header.Tensor, len(sel.tensors))
	var pieces []Piece
	etagParts := make([]string, 0, len(sel.tensors))
	for i, x := range sel.tensors {
		ts[i] = x.Tensor
		pieces = append(pieces, x.pieces...)
		etagParts = append(etagParts, sel.files[x.File].ETag+"/"+x.Tensor.Name)
	}
	head, err := SubsetHeader(ts, CommonMetadata(sel.files))
	if err != nil {
		sel.close()
		return nil, err
	}
	return &Bytes{Assembly: NewAssembly(head, pieces, s.opts.Merge, s.opts.BlockSize), Commit: sel.commit, ETag: strongETag(etagParts...), blobs: sel.blobList()}, nil
}

// OpenEach opens each tensor of the layout f gives (see Layout) whose name
// is in names or starts with prefix (or the shard of each that shard
// selects), in file and offset order, each as its own Bytes, for staging
// them side by side. Close the Each, not its elements: they share the
// files.
func (s *Service) OpenEach(ctx context.Context, c hub.Caller, f hub.FileRef, names []string, prefix, shard string) (*Each, error) {
	if len(names) == 0 && prefix == "" {
		return nil, &SpecError{"names or prefix is required"}
	}
	var prefixes []string
	if prefix != "" {
		prefixes = []string{prefix}
	}
	sel, err := s.openSelection(ctx, c, f, names, prefixes, Part{Shard: shard})
	if err != nil {
		return nil, err
	}
	e := &Each{Commit: sel.commit, blobs: sel.blobList()}
	for _, x := range sel.tensors {
		e.Tensors = append(e.Tensors, Opened{
			Bytes:  Bytes{Assembly: NewAssembly(nil, x.pieces, s.opts.Merge, s.opts.BlockSize), Commit: sel.commit},
			Tensor: x.Tensor, Shape: x.shape, File: sel.files[x.File].Path,
		})
	}
	return e, nil
}

// Each is a set of tensors opened one by one; Close releases their files.
type Each struct {
	Commit  string
	Tensors []Opened
	blobs   []Blob
}

// Close releases every file the tensors are read from.
func (e *Each) Close() error { return (&Bytes{blobs: e.blobs}).Close() }

// selection is the tensors picked for a subset or staging, with their
// pieces and the opened files they come from.
type selection struct {
	commit  string
	files   []File
	blobs   map[int]Blob // by index into files
	tensors []selectedPart
}

type selectedPart struct {
	Selected
	pieces []Piece
	shape  []uint64
}

func (sel *selection) blobList() []Blob {
	out := make([]Blob, 0, len(sel.blobs))
	for _, b := range sel.blobs {
		out = append(out, b)
	}
	return out
}

func (sel *selection) close() { (&Bytes{blobs: sel.blobList()}).Close() }

// openSelection selects tensors, lays out the part p of each, and opens
// every file they live in, once, at the listing's commit.
func (s *Service) openSelection(ctx context.Context, c hub.Caller, f hub.FileRef, names, prefixes []string, p Part) (*selection, error) {
	l, files, sel, err := s.Select(ctx, c, f, names, prefixes)
	if err != nil {
		return nil, err
	}
	if len(sel) == 0 {
		return nil, &NotFoundError{What: "a tensor matching the prefixes"}
	}
	SortByPlace(sel)
	out := &selection{commit: l.Commit, files: files, blobs: map[int]Blob{}}
	for _, x := range sel {
		b, ok := out.blobs[x.File]
		if !ok {
			if b, err = s.files.open(ctx, c, hub.FileRef{Repo: f.Repo, Rev: l.Commit, Path: files[x.File].Path}); err != nil {
				out.close()
				return nil, err
			}
			out.blobs[x.File] = b
		}
		ranges, shape, err := part(x.Tensor, p)
		if err != nil {
			out.close()
			return nil, err
		}
		out.tensors = append(out.tensors, selectedPart{Selected: x, pieces: TensorPieces(files[x.File], x.Tensor, ranges, b), shape: shape})
	}
	return out, nil
}

// strongETag hashes what derived content is derived from into a strong,
// quoted validator.
func strongETag(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprint(h, p)
		h.Write([]byte{0})
	}
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}
