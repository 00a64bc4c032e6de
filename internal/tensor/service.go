// Package tensor is the tensor-aware layer over the lazy cache: it reads
// safetensors headers with one speculative range read (two when a header is
// larger), caches them per file ETag, lists every tensor of a possibly
// sharded repo, and lays out the byte ranges for one tensor, one tensor-parallel
// rank's slice, or a subset file. It never fetches bytes itself: it asks its
// Files for lazily filled blobs, or, for a part too sparse for whole cache
// blocks (a column shard), for just its ranges, so one tensor or part costs
// about its own size upstream.
package tensor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"time"

	"github.com/hubproxy/hubproxy/internal/flight"
	"github.com/hubproxy/hubproxy/internal/header"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/resolver"
)

// Blob is one opened file, filled lazily by range.
type Blob interface {
	io.ReaderAt
	// Expect announces that [off, end) will be read next, so the cache can
	// fetch it in parallel ahead of the reads.
	Expect(off, end int64)
	// Present reports how many bytes of [off, end) are already cached.
	Present(off, end int64) int64
	Close() error
}

// FileInfo identifies an opened file.
type FileInfo struct {
	Path   string
	Commit string
	ETag   string
	Size   int64
}

// Files opens repo files through the cache, checking the caller's access
// upstream as any file request does; *repofs.FS is one. Stat answers from
// the file's resolution alone, so the tensor path opens a file only to read
// it: once for a tensor whose header is cached, twice when it is not.
type Files[B Blob] interface {
	Stat(ctx context.Context, c hub.Caller, f hub.FileRef) (resolver.Meta, error)
	Open(ctx context.Context, c hub.Caller, f hub.FileRef) (B, error)
}

// files is Files with its blob type forgotten, errors naming the path.
type files interface {
	stat(ctx context.Context, c hub.Caller, f hub.FileRef) (FileInfo, error)
	open(ctx context.Context, c hub.Caller, f hub.FileRef) (Blob, error)
}

type anyFiles[B Blob] struct{ f Files[B] }

func (a anyFiles[B]) stat(ctx context.Context, c hub.Caller, f hub.FileRef) (FileInfo, error) {
	m, err := a.f.Stat(ctx, c, f)
	if err != nil {
		return FileInfo{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	return FileInfo{Path: f.Path, Commit: m.Commit, ETag: m.ETag, Size: m.Size}, nil
}

func (a anyFiles[B]) open(ctx context.Context, c hub.Caller, f hub.FileRef) (Blob, error) {
	b, err := a.f.Open(ctx, c, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return b, nil
}

// Options configures a Service.
type Options struct {
	// SpeculativeRead is the first read of a file, large enough for typical
	// headers. Default 64 KiB: one cache block, the least any read costs
	// (huggingface_hub reads 100,000 bytes; larger headers take a second
	// read of exactly the rest).
	SpeculativeRead int64
	// MaxHeaderSize caps accepted headers. Default DefaultMaxHeaderSize,
	// well below the reference's 100 MB: a parse costs several times its
	// header at the peak, and a 50 MB header once cost 570 MB to list.
	MaxHeaderSize uint64
	// MaxTensors caps the tensors of one header. Default DefaultMaxTensors.
	MaxTensors int
	// ParseBudget bounds the header bytes parsed at once, by all requests
	// together (see parseBudget); a parse waits for its share with its
	// context, and a header larger than the whole budget is refused.
	// Default DefaultParseBudget.
	ParseBudget int64
	// HeaderCacheBytes bounds the parsed-header cache by the heap its
	// headers hold, as headerCost estimates it, rather than by their number:
	// a parsed header holds nearly twice its JSON length (a 23 MB header of
	// 200,000 tensors keeps about 42 MB), and headers of up to 100 MB are
	// accepted. A header that alone exceeds the budget is not cached, and
	// is parsed again when asked for. Default 64 MiB.
	HeaderCacheBytes int64
	// MaxIndexSize bounds a sharded index file. Default 16 MiB.
	MaxIndexSize int64
	// Merge is the largest gap between two byte ranges of one file that a
	// tensor read fetches as one run (block rounding would fetch most of
	// it anyway, and one long request beats many short ones). Default
	// 128 KiB.
	Merge int64
	// BlockSize is the cache's block size, the least a read through it
	// fetches: a read whose pieces would cost over 1.5 times their bytes in
	// whole blocks (a column shard) is read around the cache instead (see
	// isSparse). Default 64 KiB, the cache's default; negative reads
	// everything through the cache.
	BlockSize int64
	// Observe, when set, is told how each header was obtained: "parsed"
	// (read from the file), "cached" or "invalid".
	Observe func(result string)
	Logger  *slog.Logger
}

// The operational limits on headers, below the reference reader's.
const (
	// DefaultMaxHeaderSize: 16 MiB holds some 150,000 tensor entries
	// written as writers write them (about 110 bytes each), more than any
	// published checkpoint puts in one file; huggingface_hub and
	// huggingface.js read at most 25,000,000 bytes remotely.
	DefaultMaxHeaderSize = 16 << 20
	// DefaultMaxTensors: the largest published checkpoints have tens of
	// thousands of tensors in all (DeepSeek-V3's 163 shards some 91,000,
	// a few thousand per shard), so 200,000 in one header is headroom even
	// for a merged single file, while it bounds the parsed form of a
	// header that packs tiny entries (some 20 bytes each in the array form)
	// into its 16 MiB.
	DefaultMaxTensors = 200_000
	// DefaultParseBudget: two maximal headers, or many ordinary ones, at
	// once.
	DefaultParseBudget = 2 * DefaultMaxHeaderSize
)

// Service answers tensor questions about repos. Safe for concurrent use.
type Service struct {
	files   files
	opts    Options
	log     *slog.Logger
	headers *costLRU[string, *header.Header] // file ETag → parsed header
	flights flight.Group[*header.Header]     // header reads by ETag (internal/flight)
	budget  *parseBudget
}

// New returns a Service reading files through fs.
func New[B Blob](fs Files[B], opts Options) *Service {
	if opts.SpeculativeRead <= 0 {
		opts.SpeculativeRead = 64 << 10
	}
	if opts.MaxHeaderSize == 0 {
		opts.MaxHeaderSize = DefaultMaxHeaderSize
	}
	if opts.MaxTensors <= 0 {
		opts.MaxTensors = DefaultMaxTensors
	}
	if opts.ParseBudget <= 0 {
		opts.ParseBudget = DefaultParseBudget
	}
	if opts.HeaderCacheBytes <= 0 {
		opts.HeaderCacheBytes = 64 << 20
	}
	if opts.MaxIndexSize <= 0 {
		opts.MaxIndexSize = 16 << 20
	}
	if opts.Merge <= 0 {
		opts.Merge = 128 << 10
	}
	if opts.BlockSize == 0 {
		opts.BlockSize = 64 << 10
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observe == nil {
		opts.Observe = func(string) {}
	}
	return &Service{files: anyFiles[B]{fs}, opts: opts, log: opts.Logger, headers: newCostLRU[string, *header.Header](opts.HeaderCacheBytes),
		budget: newParseBudget(opts.ParseBudget)}
}

// File is one safetensors file of a repo with its parsed header.
type File struct {
	FileInfo
	Header *header.Header
}

// FileError says which file broke which rule; the message is safe to show.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// headerReadTimeout bounds a shared header read, which no single caller's
// context may cancel.
const headerReadTimeout = 5 * time.Minute

// NotFoundError is a tensor or a safetensors layout that is not there.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What + " not found" }

// header returns the parsed header of f for caller c, reading it through
// the cache: one speculative read from offset 0, and a second read only for
// the rest of a header larger than that.
func (s *Service) header(ctx context.Context, c hub.Caller, f hub.FileRef) (File, error) {
	info, err := s.files.stat(ctx, c, f)
	if err != nil {
		return File{}, err
	}
	if h, ok := s.headers.Get(info.ETag); ok {
		s.opts.Observe("cached")
		return File{FileInfo: info, Header: h}, nil
	}
	// Parsing is shared by concurrent callers of the same content, keyed by
	// its ETag (a content hash) and never by who asks: every caller has
	// already passed its own access check in Stat. The shared read opens
	// its own blob on a context of its own: the caller that starts it may
	// leave, and its blob with it, while others still wait (when all have
	// left, it stops). It also caches what it parsed, so the cost is
	// reckoned once per parse, not once per waiting caller.
	h, err := s.flights.Do(ctx, info.ETag, headerReadTimeout, func(fctx context.Context) (*header.Header, error) {
		own, err := s.files.open(fctx, c, f.At(info.Commit))
		if err != nil {
			return nil, err
		}
		defer own.Close()
		h, err := s.readHeader(fctx, own, info.Size)
		if err != nil {
			return nil, err
		}
		s.headers.Add(info.ETag, h, headerCost(h)+int64(len(info.ETag)))
		return h, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return File{}, ctx.Err()
		}
		var fe *header.FormatError
		if errors.As(err, &fe) {
			s.opts.Observe("invalid")
			return File{}, &FileError{Path: f.Path, Err: err}
		}
		// Not the file's fault (upstream down, a fill failed): keep the
		// cause's own type for the error mapping.
		return File{}, fmt.Errorf("reading the header of %s: %w", f.Path, err)
	}
	s.opts.Observe("parsed")
	return File{FileInfo: info, Header: h}, nil
}

// readHeader reads and parses the header of a file of size bytes: one
// speculative read, then, for a larger header, one read of the rest. The
// header's length is checked against the limits before anything more is
// read, and the parse holds its length of the parse budget while the
// header is read whole and parsed.
func (s *Service) readHeader(ctx context.Context, blob Blob, size int64) (*header.Header, error) {
	opts := header.Options{MaxHeaderSize: s.opts.MaxHeaderSize, MaxTensors: s.opts.MaxTensors}
	spec := min(s.opts.SpeculativeRead, size)
	if spec < header.PrefixSize {
		return nil, &header.FormatError{Kind: header.HeaderTooSmall, Reason: fmt.Sprintf("the file is %d bytes long", size)}
	}
	blob.Expect(0, spec)
	buf := make([]byte, spec)
	if _, err := blob.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, err
	}
	n, err := header.HeaderLen(buf, opts)
	if err != nil {
		return nil, err
	}
	end := header.PrefixSize + n
	if end > uint64(size) {
		// Parse refuses it (InvalidHeaderLength) without allocating.
		return header.Parse(bytesReaderAt(buf), size, opts)
	}
	release, err := s.budget.acquire(ctx, int64(n))
	if err != nil {
		return nil, err
	}
	defer release()
	var r io.ReaderAt = bytesReaderAt(buf)
	if end > uint64(spec) {
		// The rest of the header, in one request.
		blob.Expect(spec, int64(end))
		r = blob
	}
	return header.Parse(r, size, opts)
}

// bytesReaderAt serves ReadAt from a buffer holding a file's prefix.
type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// candidates are the files a safetensors repo is found by, in the order the
// JS client's parseSafetensorsMetadata tries them (diffusers layouts last).
var candidates = []string{
	"model.safetensors",
	"model.safetensors.index.json",
	"diffusion_pytorch_model.safetensors",
	"diffusion_pytorch_model.safetensors.index.json",
	"transformer/diffusion_pytorch_model.safetensors",
	"transformer/diffusion_pytorch_model.safetensors.index.json",
	"unet/diffusion_pytorch_model.safetensors",
	"unet/diffusion_pytorch_model.safetensors.index.json",
}

// Layout is where a repo's tensors live: one file, or an index and its shards.
type Layout struct {
	Commit string
	Index  string            // the index file, "" for a single file
	Files  []string          // safetensors files, in index order
	Owner  map[string]string // tensor name → file, from the index; nil for a single file
}

// Layout finds the safetensors files of f.Repo at f.Rev for caller c.
// f.Path, when set, names the safetensors file or index to use instead of
// searching for one.
func (s *Service) Layout(ctx context.Context, c hub.Caller, f hub.FileRef) (Layout, error) {
	if f.Path != "" {
		if err := hub.ValidPath(f.Path); err != nil {
			return Layout{}, err
		}
		return s.layoutOf(ctx, c, f)
	}
	for _, cand := range candidates {
		f.Path = cand
		l, err := s.layoutOf(ctx, c, f)
		if isMissingFile(err) {
			continue
		}
		return l, err
	}
	return Layout{}, &NotFoundError{What: "a safetensors file (model.safetensors or an index) in " + f.Repo.String()}
}

// layoutOf is the layout f.Path gives: itself, or the shards it indexes.
func (s *Service) layoutOf(ctx context.Context, c hub.Caller, f hub.FileRef) (Layout, error) {
	file := f.Path
	info, err := s.files.stat(ctx, c, f)
	if err != nil {
		return Layout{}, err
	}
	if path.Ext(file) != ".json" {
		return Layout{Commit: info.Commit, Files: []string{file}}, nil
	}
	if info.Size > s.opts.MaxIndexSize {
		return Layout{}, &FileError{Path: file, Err: fmt.Errorf("index is %d bytes, over the %d-byte limit", info.Size, s.opts.MaxIndexSize)}
	}
	blob, err := s.files.open(ctx, c, f.At(info.Commit))
	if err != nil {
		return Layout{}, err
	}
	defer blob.Close()
	data := make([]byte, info.Size)
	blob.Expect(0, info.Size)
	if _, err := blob.ReadAt(data, 0); err != nil && err != io.EOF {
		return Layout{}, err
	}
	ix, err := header.ParseIndex(data)
	if err != nil {
		return Layout{}, &FileError{Path: file, Err: err}
	}
	dir := path.Dir(file)
	join := func(shard string) string {
		if dir == "." {
			return shard
		}
		return dir + "/" + shard
	}
	l := Layout{Commit: info.Commit, Index: file, Owner: make(map[string]string, len(ix.WeightMap))}
	for _, shard := range ix.Shards() {
		l.Files = append(l.Files, join(shard))
	}
	for name, shard := range ix.WeightMap {
		l.Owner[name] = join(shard)
	}
	return l, nil
}

// isMissingFile reports whether err says the file is not there (the hub's
// EntryNotFound matches fs.ErrNotExist).
func isMissingFile(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// Locate finds one tensor by name in the layout f gives (see Layout).
func (s *Service) Locate(ctx context.Context, c hub.Caller, f hub.FileRef, name string) (File, header.Tensor, error) {
	l, err := s.Layout(ctx, c, f)
	if err != nil {
		return File{}, header.Tensor{}, err
	}
	p := l.Files[0]
	if l.Owner != nil {
		var ok bool
		if p, ok = l.Owner[name]; !ok {
			return File{}, header.Tensor{}, &NotFoundError{What: fmt.Sprintf("tensor %q", name)}
		}
	}
	hf, err := s.header(ctx, c, hub.FileRef{Repo: f.Repo, Rev: l.Commit, Path: p})
	if err != nil {
		return File{}, header.Tensor{}, err
	}
	t, ok := hf.Header.Lookup(name)
	if !ok {
		if l.Owner != nil {
			return File{}, header.Tensor{}, &FileError{Path: p, Err: fmt.Errorf("the index places tensor %q in this file, but its header does not hold it", name)}
		}
		return File{}, header.Tensor{}, &NotFoundError{What: fmt.Sprintf("tensor %q", name)}
	}
	return hf, t, nil
}

// Select returns the tensors of the layout f gives (see Layout) whose names
// are in names or start with one of prefixes, with their files, sorted by
// file and offset.
func (s *Service) Select(ctx context.Context, c hub.Caller, f hub.FileRef, names, prefixes []string) (Layout, []File, []Selected, error) {
	l, err := s.Layout(ctx, c, f)
	if err != nil {
		return Layout{}, nil, nil, err
	}
	files, err := s.Headers(ctx, c, f.Repo, l)
	if err != nil {
		return Layout{}, nil, nil, err
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var sel []Selected
	for fi, hf := range files {
		for _, t := range hf.Header.Tensors {
			if want[t.Name] || hasAnyPrefix(t.Name, prefixes) {
				delete(want, t.Name)
				sel = append(sel, Selected{File: fi, Tensor: t})
			}
		}
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for n := range want {
			missing = append(missing, n)
		}
		sort.Strings(missing)
		return Layout{}, nil, nil, &NotFoundError{What: fmt.Sprintf("tensor %q", missing[0])}
	}
	return l, files, sel, nil
}

// Selected is one tensor picked for a subset, with the index of its file.
type Selected struct {
	File   int
	Tensor header.Tensor
}

func hasAnyPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && len(name) >= len(p) && name[:len(p)] == p {
			return true
		}
	}
	return false
}
