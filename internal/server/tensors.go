package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// The tensor API (DESIGN.md "Tensor API"):
//
//	GET /models/{repo}/tensors?revision=&file=           every tensor, from headers only
//	GET /models/{repo}/tensors/{name}?revision=&file=    one tensor's bytes
//	    &shard=dim:rank/world | &slice=a:b,:,…           one rank's part, or a slice
//	GET /models/{repo}/safetensors?name=…&prefix=…       a safetensors file of just those tensors

// requestError is a client mistake in a tensor request: 400.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

type tensorRoute struct {
	repo   hub.Repo
	kind   int // tensorList, tensorOne or tensorSubset
	name   string
	rev    string
	file   string
	values url.Values
}

const (
	tensorList = iota
	tensorOne
	tensorSubset
)

// MaxTensorName bounds tensor names taken from URLs.
const MaxTensorName = 1024

// parseTensorRoute parses the escaped path and query of a tensor URL.
// errNoRoute means it is not one (the caller tries the file routes).
func parseTensorRoute(r *http.Request) (tensorRoute, error) {
	p, ok := strings.CutPrefix(r.URL.EscapedPath(), "/models/")
	if !ok {
		return tensorRoute{}, errNoRoute
	}
	var tr tensorRoute
	var repoEsc, nameEsc string
	switch {
	case strings.HasSuffix(p, "/tensors"):
		repoEsc, tr.kind = strings.TrimSuffix(p, "/tensors"), tensorList
	case strings.HasSuffix(p, "/safetensors"):
		repoEsc, tr.kind = strings.TrimSuffix(p, "/safetensors"), tensorSubset
	case strings.Contains(p, "/tensors/"):
		repoEsc, nameEsc, _ = strings.Cut(p, "/tensors/")
		tr.kind = tensorOne
	default:
		return tensorRoute{}, errNoRoute
	}
	repo, err := parseRepo(hub.Model, repoEsc)
	if err != nil {
		return tensorRoute{}, err
	}
	tr.repo = repo
	if tr.kind == tensorOne {
		if tr.name, err = unescape("tensor name", nameEsc); err != nil {
			return tensorRoute{}, err
		}
		if tr.name == "" || len(tr.name) > MaxTensorName || !utf8.ValidString(tr.name) ||
			strings.ContainsFunc(tr.name, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return tensorRoute{}, &hub.InvalidError{Field: "tensor name", Value: tr.name, Reason: "must be 1 to 1024 bytes of UTF-8 without control characters"}
		}
	}
	q := r.URL.Query()
	tr.values = q
	tr.rev = q.Get("revision")
	if tr.rev == "" {
		tr.rev = "main"
	}
	if err := hub.ValidRevision(tr.rev); err != nil {
		return tensorRoute{}, err
	}
	if tr.file = q.Get("file"); tr.file != "" {
		if err := hub.ValidPath(tr.file); err != nil {
			return tensorRoute{}, err
		}
	}
	return tr, nil
}

// serveModels routes /models/…: the tensor API, or a file of a model whose
// namespace happens to be "models".
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	tr, err := parseTensorRoute(r)
	if err == errNoRoute {
		s.serveFiles(w, r)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, r, &methodError{allow: "GET, HEAD"})
		return
	}
	if err := s.opts.Admission.repo(tr.repo); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch tr.kind {
	case tensorList:
		s.serveTensorList(w, r, tr)
	case tensorOne:
		s.serveTensor(w, r, tr)
	case tensorSubset:
		s.serveSubset(w, r, tr)
	}
}

func (s *Server) serveTensorList(w http.ResponseWriter, r *http.Request, tr tensorRoute) {
	l, err := s.tensors.List(r.Context(), r.Header.Get("Authorization"), tr.repo, tr.rev, tr.file)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := json.Marshal(l)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Repo-Commit", l.Commit)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func (s *Server) serveTensor(w http.ResponseWriter, r *http.Request, tr tensorRoute) {
	shard, slice := tr.values.Get("shard"), tr.values.Get("slice")
	if shard != "" && slice != "" {
		s.writeError(w, r, &requestError{"use either shard or slice, not both"})
		return
	}
	auth := r.Header.Get("Authorization")
	f, t, err := s.tensors.Locate(r.Context(), auth, tr.repo, tr.rev, tr.file, tr.name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ranges, shape := []header.ByteRange{{Off: 0, Len: t.Len()}}, t.Shape
	switch {
	case shard != "":
		dim, rank, world, err := header.ParseShardSpec(shard)
		if err == nil {
			ranges, shape, err = t.Shard(dim, rank, world)
		}
		if err != nil {
			s.writeError(w, r, &requestError{"shard " + strconv.Quote(shard) + ": " + err.Error()})
			return
		}
	case slice != "":
		dims, err := header.ParseSliceSpec(slice)
		if err == nil {
			ranges, shape, err = t.Slice(dims)
		}
		if err != nil {
			s.writeError(w, r, &requestError{"slice " + strconv.Quote(slice) + ": " + err.Error()})
			return
		}
	}
	_, blob, err := s.files.Open(r.Context(), auth, tr.repo, f.Commit, f.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer blob.Close()
	asm := tensor.NewAssembly(nil, tensor.TensorPieces(f, t, ranges, blob), s.opts.TensorMerge)
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Repo-Commit", f.Commit)
	h.Set("X-Tensor-Dtype", string(t.DType))
	h.Set("X-Tensor-Shape", shapeString(shape))
	h.Set("X-Tensor-File", f.Path)
	h.Set("ETag", strongETag(f.ETag, tr.name, shard, slice))
	h.Set("Accept-Ranges", "bytes")
	s.serveAssembly(w, r, asm)
}

func (s *Server) serveSubset(w http.ResponseWriter, r *http.Request, tr tensorRoute) {
	names, prefixes := tr.values["name"], tr.values["prefix"]
	if len(names) == 0 && len(prefixes) == 0 {
		s.writeError(w, r, &requestError{"name or prefix is required (repeat either to select more)"})
		return
	}
	auth := r.Header.Get("Authorization")
	l, files, sel, err := s.tensors.Select(r.Context(), auth, tr.repo, tr.rev, tr.file, names, prefixes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(sel) == 0 {
		s.writeError(w, r, &tensor.NotFoundError{What: "a tensor matching the prefixes"})
		return
	}
	tensor.SortByPlace(sel)
	blobs := make(map[int]tensor.Blob)
	defer func() {
		for _, b := range blobs {
			b.Close()
		}
	}()
	ts := make([]header.Tensor, len(sel))
	var pieces []tensor.Piece
	etagParts := []string{}
	for i, x := range sel {
		ts[i] = x.Tensor
		b, ok := blobs[x.File]
		if !ok {
			_, b, err = s.files.Open(r.Context(), auth, tr.repo, l.Commit, files[x.File].Path)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			blobs[x.File] = b
		}
		pieces = append(pieces, tensor.TensorPieces(files[x.File], x.Tensor, []header.ByteRange{{Off: 0, Len: x.Tensor.Len()}}, b)...)
		etagParts = append(etagParts, files[x.File].ETag+"/"+x.Tensor.Name)
	}
	head, err := tensor.SubsetHeader(ts, tensor.CommonMetadata(files))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="subset.safetensors"`)
	h.Set("X-Repo-Commit", l.Commit)
	h.Set("ETag", strongETag(etagParts...))
	h.Set("Accept-Ranges", "bytes")
	s.serveAssembly(w, r, tensor.NewAssembly(head, pieces, s.opts.TensorMerge))
}

func (s *Server) serveAssembly(w http.ResponseWriter, r *http.Request, asm *tensor.Assembly) {
	if asm.Size() == 0 {
		// An empty tensor has no satisfiable range; answer it whole.
		r.Header.Del("Range")
	}
	s.observeCache(r, asm.Present(), asm.Size())
	http.ServeContent(w, r, "", time.Time{}, &abortOnError{r: io.NewSectionReader(asm, 0, asm.Size()), s: s, req: r})
}

// strongETag is a validator for derived content: a hash of what it is
// derived from (file ETags are content hashes, so this is one too).
func strongETag(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

func shapeString(shape []uint64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// fileOpener gives the tensor service lazily filled files, resolving and
// checking access exactly as a /resolve/ request does.
type fileOpener struct{ s *Server }

func (o fileOpener) Open(ctx context.Context, auth string, repo hub.Repo, rev, path string) (tensor.FileInfo, tensor.Blob, error) {
	m, err := o.s.opts.Resolver.File(ctx, auth, repo, rev, path)
	if err != nil {
		return tensor.FileInfo{}, nil, err
	}
	h, err := o.s.opts.Store.Open(ctx, cache.File{Repo: repo, Commit: m.Commit, Path: path, ETag: m.ETag, Size: m.Size},
		o.s.opts.Resolver.Origin(auth, repo, path, m))
	if err != nil {
		return tensor.FileInfo{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return tensor.FileInfo{Path: path, Commit: m.Commit, ETag: m.ETag, Size: m.Size}, h, nil
}
