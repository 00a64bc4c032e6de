package soak

import (
	"errors"
	"io"
	"time"
)

// Config is one soak run.
type Config struct {
	// Bin is the hubproxy binary to run (built with go build).
	Bin string
	// Duration is how long the chaos runs; warm-up before it and the quiet
	// phase after it come on top (about a minute together).
	Duration time.Duration
	// Seed decides the chaos schedule, the fault plan and every client's
	// choices. 0 picks one from the clock (and prints it).
	Seed uint64
	// Clients is the number of concurrent clients.
	Clients int
	// Crashy is the number of hubproxy processes that get killed; one more,
	// the steady one, never is.
	Crashy int
	// MinIO is the MinIO binary the shared store runs on (`make minio`
	// builds it, as for `make test`).
	MinIO string
	// NoStore runs the proxies without a shared store, each on its own,
	// and without the store's chaos.
	NoStore bool
	// Warmup is the traffic before the chaos starts, after which the steady
	// proxy's resources are measured as the baseline for the leak check.
	Warmup time.Duration
	// WorkDir holds the caches (on tmpfs mounts) and the proxies' logs; ""
	// makes a temporary one, removed after a passing run.
	WorkDir string
	// NoTmpfs runs the caches on the work directory's filesystem instead of
	// tmpfs mounts of their own, which need root; the disk-fill chaos is then
	// left out (and the report says so).
	NoTmpfs bool
	// Out receives progress lines and the report.
	Out io.Writer
	// ReportPath, when set, also gets the figures as Markdown.
	ReportPath string
}

// Defaults for Config's zero values.
const (
	DefaultDuration = 10 * time.Minute
	DefaultClients  = 12
	// Two crashy proxies and a steady one: with a shared store, a killed
	// node's chunks are taken over by, and shared between, the two left.
	DefaultCrashy = 2
	DefaultWarmup = 15 * time.Second
)

func (c *Config) fill() error {
	if c.Bin == "" {
		return errors.New("soak: the hubproxy binary is required (-hubproxy)")
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Clients <= 0 {
		c.Clients = DefaultClients
	}
	if c.Crashy <= 0 {
		c.Crashy = DefaultCrashy
	}
	if c.Warmup <= 0 {
		c.Warmup = DefaultWarmup
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return nil
}
