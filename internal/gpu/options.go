package gpu

import (
	"errors"
	"log/slog"
	"time"
)

// Options configures a Copier. Zero values select the documented defaults.
type Options struct {
	DriverPath    string        // CUDA driver library, loaded with dlopen at Open; default "libcuda.so.1"
	PinnedBuffers int           // pinned host staging buffers, shared by all devices; default 4
	BufferSize    int64         // bytes per pinned buffer (and per host-to-device copy); default 64 MiB
	Streams       int           // copy streams per device; default 4
	DeviceBudget  int64         // max bytes leased per device; 0 = 90% of the device's total memory
	LeaseTTL      time.Duration // a lease not released by then is freed by the reaper; default 10 min
	Alignment     int64         // offset alignment of tensors inside a lease allocation; default 256
	Logger        *slog.Logger  // nil = discard; reports frees that fail in the reaper and in Close
}

// The defaults for zero-valued Options fields.
const (
	DefaultDriverPath    = "libcuda.so.1"
	DefaultPinnedBuffers = 4
	DefaultBufferSize    = 64 << 20
	DefaultStreams       = 4
	DefaultLeaseTTL      = 10 * time.Minute
	DefaultAlignment     = 256
	// defaultBudgetPercent of a device's total memory is its budget when
	// Options.DeviceBudget is 0: the rest is left to the inference process's
	// own context and activations.
	defaultBudgetPercent = 90
)

// withDefaults validates o and fills in defaults. BufferSize is rounded up to
// a multiple of Alignment so that every buffer-sized piece of a lease starts
// on an aligned device address (copies then never straddle alignment gaps
// in the middle of a DMA burst, and the pieces tile the lease exactly).
func (o Options) withDefaults() (Options, error) {
	if o.PinnedBuffers < 0 || o.BufferSize < 0 || o.Streams < 0 || o.DeviceBudget < 0 ||
		o.LeaseTTL < 0 || o.Alignment < 0 {
		return o, errors.New("gpu: negative option")
	}
	if o.DriverPath == "" {
		o.DriverPath = DefaultDriverPath
	}
	if o.PinnedBuffers == 0 {
		o.PinnedBuffers = DefaultPinnedBuffers
	}
	if o.BufferSize == 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.Streams == 0 {
		o.Streams = DefaultStreams
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Alignment == 0 {
		o.Alignment = DefaultAlignment
	}
	if o.Alignment&(o.Alignment-1) != 0 {
		return o, errors.New("gpu: Options.Alignment must be a power of two")
	}
	o.BufferSize = alignUp(o.BufferSize, o.Alignment)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// alignUp rounds n up to a multiple of a, a power of two.
func alignUp(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }
