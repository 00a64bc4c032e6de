package cache

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Options configures a Store. Zero values select the documented defaults.
type Options struct {
	Dir          string // root; itself a valid HF_HUB_CACHE
	MaxBytes     int64  // budget for blobs + partial present bytes; 0 = unlimited
	MinFreeBytes int64  // evict to keep this much free on the filesystem (statfs); 0 = off
	BlockSize    int64  // fill granularity; default 64 KiB. Reads round out to blocks.
	ChunkSize    int64  // max bytes per upstream request; default 8 MiB. Larger missing runs split into chunks fetched in parallel.
	ReadAhead    int    // chunks kept in flight ahead of a sequential reader; default 4
	MaxFills     int    // global cap on concurrent upstream requests; default 16
	// AlignFills makes every upstream request lie within one chunk:
	// requests split at multiples of ChunkSize from the file's start
	// rather than from where a missing run starts. For an origin that
	// serves in ChunkSize units (the shared tier's), a misaligned request
	// costs two of its chunks.
	AlignFills   bool
	FillTimeout  time.Duration // per upstream chunk request; default 5 min
	MaxMetaBytes int64         // bound on cached API documents; default DefaultMaxMetaBytes
	// MaxNoExist and MaxNoExistPerCommit bound the files and directories
	// .no_exist markers may take, in all and for one repo's commit;
	// defaults DefaultMaxNoExist and DefaultMaxNoExistPerCommit (noexist.go).
	MaxNoExist, MaxNoExistPerCommit int
	// OpenFiles is how many unreferenced verified blobs keep their file
	// open for the next reader; default 256, negative for none.
	OpenFiles int
	Logger    *slog.Logger // nil = discard
	// Pins are kept from eviction, besides those `hubproxy cache pin`
	// records in the directory (pins.go).
	Pins []Pin
	// OnFillError, when set, is told each fill that ended early with an
	// error (not a cancellation), so metrics can say why fills fail.
	OnFillError func(err error)
	// OnVerifyFailed, when set, is told each file whose bytes, all present,
	// did not hash to its etag (the partial is deleted): whoever supplied
	// them (a shared store) can drop its copy. It must not block.
	OnVerifyFailed func(repo hub.Repo, etag string)
}

// The defaults for zero-valued Options fields.
const (
	DefaultBlockSize   = 64 << 10
	DefaultChunkSize   = 8 << 20
	DefaultReadAhead   = 4
	DefaultMaxFills    = 16
	DefaultFillTimeout = 5 * time.Minute
	DefaultOpenFiles   = 256
)

// maxFillAttempts bounds how often a reader restarts a failed fill of the same
// block before it gives up and returns the last upstream error.
const maxFillAttempts = 3

// withDefaults validates o and fills in defaults. ChunkSize is rounded up to
// a whole number of blocks so that chunks always start on a block boundary.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("cache: Options.Dir is required")
	}
	if o.MaxBytes < 0 || o.MinFreeBytes < 0 || o.BlockSize < 0 || o.ChunkSize < 0 ||
		o.ReadAhead < 0 || o.MaxFills < 0 || o.FillTimeout < 0 {
		return o, errors.New("cache: negative option")
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.ChunkSize < o.BlockSize {
		o.ChunkSize = o.BlockSize
	}
	o.ChunkSize = (o.ChunkSize + o.BlockSize - 1) / o.BlockSize * o.BlockSize
	if o.ReadAhead == 0 {
		o.ReadAhead = DefaultReadAhead
	}
	if o.MaxFills == 0 {
		o.MaxFills = DefaultMaxFills
	}
	if o.FillTimeout == 0 {
		o.FillTimeout = DefaultFillTimeout
	}
	switch {
	case o.OpenFiles == 0:
		o.OpenFiles = DefaultOpenFiles
	case o.OpenFiles < 0:
		o.OpenFiles = 0
	}
	if o.MaxMetaBytes <= 0 {
		o.MaxMetaBytes = DefaultMaxMetaBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o, nil
}
