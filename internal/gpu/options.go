package gpu

import (
	"errors"
	"log/slog"
	"time"
)

// Options configures a Copier. Zero values select the documented defaults.
type Options struct {
	DriverPath string // CUDA driver library, loaded with dlopen at Open; default "libcuda.so.1"
	// PinnedBuffers and BufferSize size each device's pool of pinned host
	// buffers (pinned on the device's NUMA node); every buffer is one
	// host-to-device copy in flight. Defaults 16 and 8 MiB.
	PinnedBuffers int
	BufferSize    int64
	Streams       int // copy streams per device; default 4
	// ReadersPerPiece is how many concurrent reads fill one buffer (each at
	// least minReadSize), so that a lazily filled source is read ahead by
	// more than one request per buffer; default 4.
	ReadersPerPiece int
	// DeviceBudget caps the bytes leased per device; 0 = no cap beyond the
	// free memory the driver reports less DeviceHeadroom.
	DeviceBudget int64
	// DeviceHeadroom is the free device memory staging always leaves to the
	// inference process (its context, activations, KV cache); 0 = 10% of
	// the device's total memory.
	DeviceHeadroom int64
	// LeaseTTL is how long a lease that is not held (StageOptions.Hold)
	// lives unless renewed; default 10 min.
	LeaseTTL  time.Duration
	Alignment int64        // offset alignment of tensors inside a lease allocation; default 256
	Logger    *slog.Logger // nil = discard; reports frees that fail in the reaper and in Close, faults and recoveries
	// ResetOnFault brings a device back in process after a sticky fault:
	// its primary context is reset (cuDevicePrimaryCtxReset) and attached
	// again. CUDA documents no such recovery (after a sticky error the
	// process must end and be relaunched), so it is off by default: the
	// device is marked failed, admits no more work, drops its leases once
	// its calls have drained, and OnFatal is called so that the process
	// can exit and its supervisor restart it.
	ResetOnFault bool
	// OnFatal is called once, when ResetOnFault is off, after the first
	// sticky fault's device has drained; nil: the fault is only logged.
	OnFatal func(err error)

	// sysfs is where the driver reads devices' NUMA nodes; "" = /sys.
	// Tests point it at a tree of their own.
	sysfs string
}

// The defaults for zero-valued Options fields.
const (
	DefaultDriverPath      = "libcuda.so.1"
	DefaultPinnedBuffers   = 16
	DefaultBufferSize      = 8 << 20
	DefaultStreams         = 4
	DefaultReadersPerPiece = 4
	DefaultLeaseTTL        = 10 * time.Minute
	DefaultAlignment       = 256
	// defaultHeadroomPercent of a device's total memory is left free when
	// Options.DeviceHeadroom is 0.
	defaultHeadroomPercent = 10
	// minReadSize is the smallest read a piece is split into: below it one
	// read per piece is as fast, and cheaper.
	minReadSize = 64 << 10
)

// withDefaults validates o and fills in defaults. BufferSize is rounded up to
// a multiple of Alignment so that every buffer-sized piece of a lease starts
// on an aligned device address (copies then never straddle alignment gaps
// in the middle of a DMA burst, and the pieces tile the lease exactly).
func (o Options) withDefaults() (Options, error) {
	if o.PinnedBuffers < 0 || o.BufferSize < 0 || o.Streams < 0 || o.DeviceBudget < 0 ||
		o.DeviceHeadroom < 0 || o.LeaseTTL < 0 || o.Alignment < 0 || o.ReadersPerPiece < 0 {
		return o, errors.New("gpu: negative option")
	}
	if o.DriverPath == "" {
		o.DriverPath = DefaultDriverPath
	}
	if o.sysfs == "" {
		o.sysfs = "/sys"
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
	if o.ReadersPerPiece == 0 {
		o.ReadersPerPiece = DefaultReadersPerPiece
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

// roundUp rounds n up to a multiple of a, which need not be a power of two
// (the driver's granularity is one in practice, but nothing promises it).
func roundUp(n, a int64) int64 {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}
