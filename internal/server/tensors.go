package server

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

// The tensor API (README "API overview"; the contract is api/openapi.yaml):
//
//	GET /models/{repo}/tensors?revision=&file=           every tensor, from headers only
//	GET /models/{repo}/tensors/{name}?revision=&file=    one tensor's bytes
//	    &shard=dim:rank/world | &slice=a:b,:,…           one rank's part, or a slice
//	GET /models/{repo}/safetensors?name=…&prefix=…       a safetensors file of just those tensors

// requestError is a client mistake in a request: 400.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

// serveModels routes /models/…: the tensor API, or a file of a model whose
// namespace happens to be "models".
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tr, err := hub.ParseTensorURL(r.URL.EscapedPath(), q)
	if err == hub.ErrNoRoute {
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
	if err := s.opts.Admission.repo(tr.Repo); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch tr.Kind {
	case hub.TensorList:
		s.serveTensorList(w, r, tr)
	case hub.TensorOne:
		s.serveTensor(w, r, tr, q)
	case hub.TensorSubset:
		s.serveSubset(w, r, tr, q)
	}
}

func (s *Server) serveTensorList(w http.ResponseWriter, r *http.Request, tr hub.TensorURL) {
	l, err := s.opts.Tensors.List(r.Context(), callerOf(r), tr.FileRef)
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

func (s *Server) serveTensor(w http.ResponseWriter, r *http.Request, tr hub.TensorURL, q url.Values) {
	part := tensor.Part{Shard: q.Get("shard"), Slice: q.Get("slice")}
	t, err := s.opts.Tensors.OpenTensor(r.Context(), callerOf(r), tr.FileRef, tr.Name, part)
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

func (s *Server) serveSubset(w http.ResponseWriter, r *http.Request, tr hub.TensorURL, q url.Values) {
	b, err := s.opts.Tensors.OpenSubset(r.Context(), callerOf(r), tr.FileRef, q["name"], q["prefix"])
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
	if s.limitRanges(w, r, asm) {
		s.serveContent(w, r, asm)
	}
}

func shapeString(shape []uint64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
