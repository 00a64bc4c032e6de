package server

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// The tensor API (README "API overview"; the contract is api/openapi.yaml):
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
	repo, err := hub.ParseEscapedRepo(hub.Model, repoEsc)
	if err != nil {
		return tensorRoute{}, err
	}
	tr.repo = repo
	if tr.kind == tensorOne {
		if tr.name, err = hub.Unescape("tensor name", nameEsc); err != nil {
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
	l, err := s.opts.Tensors.List(r.Context(), r.Header.Get("Authorization"), tr.repo, tr.rev, tr.file)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The listing is streamed, never built whole: a header of 150,000
	// tensors lists as 17 MB of JSON. Writing it once to a counter first
	// costs a little CPU and no memory, and keeps Content-Length (and HEAD).
	var size byteCounter
	l.WriteJSON(&size)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Repo-Commit", l.Commit)
	w.Header().Set("Content-Length", strconv.FormatInt(int64(size), 10))
	if r.Method != http.MethodHead {
		l.WriteJSON(w) // a failed write is a client that left
	}
}

// byteCounter is an io.Writer that only counts.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}

func (s *Server) serveTensor(w http.ResponseWriter, r *http.Request, tr tensorRoute) {
	part := tensor.Part{Shard: tr.values.Get("shard"), Slice: tr.values.Get("slice")}
	t, err := s.opts.Tensors.OpenTensor(r.Context(), r.Header.Get("Authorization"), tr.repo, tr.rev, tr.file, tr.name, part)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer t.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Repo-Commit", t.Commit)
	h.Set("X-Tensor-Dtype", string(t.Tensor.DType))
	h.Set("X-Tensor-Shape", shapeString(t.Shape))
	h.Set("X-Tensor-File", t.File)
	h.Set("ETag", t.ETag)
	h.Set("Accept-Ranges", "bytes")
	s.serveAssembly(w, r, t.Assembly)
}

func (s *Server) serveSubset(w http.ResponseWriter, r *http.Request, tr tensorRoute) {
	b, err := s.opts.Tensors.OpenSubset(r.Context(), r.Header.Get("Authorization"), tr.repo, tr.rev, tr.file, tr.values["name"], tr.values["prefix"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer b.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="subset.safetensors"`)
	h.Set("X-Repo-Commit", b.Commit)
	h.Set("ETag", b.ETag)
	h.Set("Accept-Ranges", "bytes")
	s.serveAssembly(w, r, b.Assembly)
}

func (s *Server) serveAssembly(w http.ResponseWriter, r *http.Request, asm *tensor.Assembly) {
	if asm.Size() == 0 {
		// An empty tensor has no satisfiable range; answer it whole.
		r.Header.Del("Range")
	}
	if !s.limitRanges(w, r, asm.Size(), asm.Present() == asm.Size()) {
		return
	}
	s.observeCache(r, asm.Present(), asm.Size())
	// As for files: read the first byte before the status line, so that
	// an upstream that fails outright gets an error answer, not an
	// aborted 200. Its bytes are needed first, and kept for the body.
	if rng := parseRange(r.Header.Get("Range"), asm.Size()); (rng.whole || rng.single) && rng.end > rng.start {
		var first [1]byte
		if _, err := asm.ReadAt(first[:], rng.start); err != nil && err != io.EOF {
			s.writeError(w, r, err)
			return
		}
	}
	http.ServeContent(w, r, "", time.Time{}, &abortOnError{r: io.NewSectionReader(asm, 0, asm.Size()), s: s, req: r})
}

func shapeString(shape []uint64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
