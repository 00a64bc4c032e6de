// Package harness runs hubproxy's benchmark: a fake hub shaped like a CDN,
// hubproxy, and nginx with slice + proxy_cache in front of the same upstream,
// all on loopback, plus aria2c as a multi-connection download client, through
// nine scenarios, then a cluster of hubproxy nodes with and without a shared
// store (MinIO, file://) against one shared pod, and hubproxy's S3 API
// against MinIO and against its own hub routes, and writes a Markdown report
// of ratios (hubproxy / peer), raw figures, the cluster's figures and the
// machine's own ceiling for a cold download.
//
// Everything it starts runs in its own process group and is killed when Run
// returns, when its context is cancelled (signals, via the caller) and when
// it panics; children also get SIGKILL if the harness process dies (Linux
// parent-death signal). bench/README.md describes the scenarios and the
// nginx setup.
package harness

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// OnlyS3 is Config.Only for the S3 scenario alone.
const OnlyS3 = "s3"

// MiB and GiB are byte units for sizes in Config.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
)

// Config is one benchmark run. Default and Quick return complete ones; the
// command line changes fields of those.
type Config struct {
	// Mode names the size preset in the report ("default", "quick").
	Mode string
	// OutDir is where the report is written as <date>-<host>.md.
	OutDir string
	// WorkDir is the parent of the run's temporary directory ("" = os.TempDir).
	WorkDir string
	// HubproxyBin is a built hubproxy binary; "" builds ./cmd/hubproxy of
	// ModuleDir into the run's temporary directory.
	HubproxyBin string
	// ModuleDir is the hubproxy module root, for building; "" finds it with
	// `go list -m github.com/hubproxy/hubproxy` from the working directory.
	ModuleDir string
	// Log receives progress lines (nil = discarded).
	Log io.Writer

	// Reps is how many times each measurement is repeated.
	Reps int
	// Bandwidth caps each upstream connection (bytes/s), like a CDN edge.
	Bandwidth int64
	// Latency is added by the fake hub before every request (hub and CDN).
	Latency time.Duration

	// LargeSize is the size of the large single-file model (scenarios 1–4).
	LargeSize int64
	// TensorSize is the size of each tensor of the large model; scenario 4
	// fetches one of them.
	TensorSize int64
	// HerdSize is the file the herd downloads (scenario 5).
	HerdSize int64
	// HerdClients is the number of concurrent cold clients in scenario 5.
	HerdClients int
	// Shards, ShardTensors, ShardRows and ShardCols shape the sharded model
	// of scenario 6 (BF16 tensors of ShardRows × ShardCols).
	Shards, ShardTensors int
	ShardRows, ShardCols int64

	// ClusterSize is the cold file of the cluster scenario (10). When it
	// equals LargeSize the scenario reads the large model itself, so the
	// fake hub holds no second copy.
	ClusterSize int64
	// ClusterNodes is the number of hubproxy nodes in scenario 10, and
	// ClusterClients the number of clients on each.
	ClusterNodes, ClusterClients int
	// MinioBin is the MinIO server the cluster's S3 store runs on; "" means
	// $HUBPROXY_MINIO, else the one `make minio` builds into the module's
	// .tools/ (built there first if missing, unless NoInstall).
	MinioBin string

	// RangeConns is the number of concurrent connections in scenario 3.
	RangeConns int
	// RangeDuration is how long each scenario-3 run lasts.
	RangeDuration time.Duration
	// RangeMin and RangeMax bound the random range sizes of scenario 3
	// (log-uniform between them).
	RangeMin, RangeMax int64

	// FixedRangeConns is the number of concurrent keep-alive connections in
	// scenarios 8 and 9 (fixed-size warm ranges).
	FixedRangeConns int
	// SmallRange and BigRange are the range sizes of scenarios 8 and 9.
	SmallRange, BigRange int64

	// Aria2Conns is aria2c's -x and -s (connections to the CDN, splits).
	Aria2Conns int
	// Aria2Split is aria2c's -k (--min-split-size), at least 1 MiB.
	Aria2Split int64
	// NoAria2 leaves aria2c out of scenario 1.
	NoAria2 bool

	// S3RangeSize is the ranged GET size of the S3 scenario (11), Run:ai
	// streamer's default for object storage; S3Conns are the concurrent
	// connections it is read at, one run each.
	S3RangeSize int64
	S3Conns     []int

	// Only names the one scenario to run ("s3"); "" runs them all. A run of
	// one skips the ceiling probes and the peers the scenario does not use.
	Only string

	// CeilingSize is how much the machine-ceiling probes move: bytes written
	// and fsynced, hashed, and sent over loopback TCP.
	CeilingSize int64

	// SliceSize is nginx's slice size (and so its upstream request size).
	SliceSize int64
	// NginxWorkers is nginx's worker_processes value ("auto" = one per core).
	NginxWorkers string
	// Verify checks the sha256 of every full download (costs CPU; on in
	// quick mode so a broken proxy fails the test).
	Verify bool
	// NoInstall refuses to apt-get install nginx or aria2, or build MinIO,
	// when missing.
	NoInstall bool
}

// Default is `make bench`: a 2 GiB model from an upstream capped at
// 50 MiB/s per connection with 20 ms latency, three repetitions, and a
// cluster of 8 nodes × 4 clients on the same 2 GiB; about twenty minutes on
// two cores, half of it the cluster.
func Default() Config {
	return Config{
		Mode:           "default",
		OutDir:         "bench/results",
		Reps:           3,
		Bandwidth:      50 * MiB,
		Latency:        20 * time.Millisecond,
		LargeSize:      2 * GiB,
		TensorSize:     32 * MiB,
		HerdSize:       256 * MiB,
		HerdClients:    32,
		ClusterSize:    2 * GiB,
		ClusterNodes:   8,
		ClusterClients: 4,
		Shards:         16,
		ShardTensors:   256,
		ShardRows:      256,
		ShardCols:      128,
		RangeConns:     64,
		RangeDuration:  5 * time.Second,
		RangeMin:       4 * KiB,
		RangeMax:       1 * MiB,
		SliceSize:      8 * MiB,
		NginxWorkers:   "auto",

		FixedRangeConns: 32,
		SmallRange:      4 * KiB,
		BigRange:        1 * MiB,
		Aria2Conns:      16,
		Aria2Split:      8 * MiB,
		S3RangeSize:     8 * MiB,
		S3Conns:         []int{8, 16},
		CeilingSize:     2 * GiB,
	}
}

// Quick is `make bench-quick` and the harness test: tiny files, a fast
// upstream, two repetitions; well under a minute. Its timings mean little; it
// proves the whole pipeline works.
func Quick() Config {
	c := Default()
	c.Mode = "quick"
	c.Reps = 2
	c.Bandwidth = 256 * MiB
	c.Latency = 2 * time.Millisecond
	c.LargeSize = 24 * MiB
	c.TensorSize = 2 * MiB
	c.HerdSize = 8 * MiB
	// The large model again: four 8 MiB chunks (the last one short), so
	// the nodes share several chunks, not one whole file; few nodes, so the
	// scenario adds seconds, not minutes.
	c.ClusterSize = c.LargeSize
	c.ClusterNodes = 3
	c.ClusterClients = 2
	c.Shards = 4
	c.ShardTensors = 64
	c.ShardRows = 64
	c.ShardCols = 64
	c.RangeConns = 16
	c.RangeDuration = time.Second
	c.SliceSize = 1 * MiB
	c.Aria2Split = 1 * MiB
	c.CeilingSize = 32 * MiB
	c.Verify = true
	return c
}

// ErrConfig is wrapped by every Validate failure.
var ErrConfig = errors.New("harness: invalid config")

// Validate reports the first field that makes the run impossible.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Reps < 1:
		return bad("reps must be at least 1")
	case c.Bandwidth < 0 || c.Latency < 0:
		return bad("bandwidth and latency must not be negative")
	case c.TensorSize <= 0 || c.TensorSize%(2*64) != 0:
		return bad("tensor size must be a positive multiple of 128 bytes (BF16 rows of 64)")
	case c.LargeSize < 2*c.TensorSize:
		return bad("large size must hold at least two tensors")
	case c.HerdSize < MiB || c.HerdClients < 1:
		return bad("herd size must be at least 1 MiB and herd clients at least 1")
	case c.ClusterSize < MiB || c.ClusterNodes < 2 || c.ClusterClients < 1:
		return bad("cluster file must be at least 1 MiB, with at least 2 nodes (one has nobody to share with) and 1 client each")
	case c.Shards < 1 || c.ShardTensors < 1 || c.ShardRows < 1 || c.ShardCols < 1:
		return bad("sharded model dimensions must be positive")
	case c.RangeConns < 1 || c.RangeDuration <= 0:
		return bad("range connections and duration must be positive")
	case c.RangeMin < 1 || c.RangeMax < c.RangeMin || c.RangeMax > c.LargeSize:
		return bad("range sizes must satisfy 1 <= min <= max <= large size")
	case c.FixedRangeConns < 1:
		return bad("fixed-range connections must be positive")
	case c.SmallRange < 1 || c.BigRange < 1 || c.SmallRange > c.LargeSize || c.BigRange > c.LargeSize:
		return bad("fixed range sizes must be between 1 byte and the large size")
	case c.Aria2Conns < 1 || c.Aria2Conns > 16:
		return bad("aria2c connections must be 1–16 (aria2c's own limit)")
	case c.Aria2Split < MiB || c.Aria2Split > GiB:
		return bad("aria2c split size must be 1 MiB–1 GiB (aria2c's own limits)")
	case c.S3RangeSize < 1 || c.S3RangeSize > c.LargeSize:
		return bad("S3 range size must be between 1 byte and the large size")
	case len(c.S3Conns) == 0 || slices.ContainsFunc(c.S3Conns, func(n int) bool { return n < 1 }):
		return bad("S3 connection counts must be given and positive")
	case c.Only != "" && c.Only != OnlyS3:
		return bad("only %q: the one scenario that runs alone is %q", c.Only, OnlyS3)
	case c.CeilingSize < MiB:
		return bad("ceiling size must be at least 1 MiB")
	case c.SliceSize < 64*KiB:
		return bad("slice size must be at least 64 KiB")
	case c.OutDir == "":
		return bad("out dir is required")
	}
	return nil
}
