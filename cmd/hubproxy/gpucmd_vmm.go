package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/app"
)

// vmmCheckOptions are gpu vmmcheck's flags; the children it re-executes
// get the same driver, device and step timeout.
type vmmCheckOptions struct {
	driverPath string
	device     int
	size       int64
	step       time.Duration
	child      string // "", "importer" or "exporter"
}

// newVMMCheckCmd is hidden: a device check (scripts/gpu-check.sh) of the
// VMM semantics staging's descriptor handover relies on, not a user tool.
func newVMMCheckCmd() *cobra.Command {
	o := vmmCheckOptions{size: 256 << 20}
	cmd := &cobra.Command{
		Use:    "vmmcheck",
		Short:  "Check the driver's VMM descriptor semantics across processes (JSON lines, one per fact)",
		Hidden: true,
		Long: `vmmcheck, on this machine's GPU: makes a VMM allocation exportable as a
POSIX descriptor, writes a pattern, and has a child process (this binary,
re-executed) import the descriptor (sent over a socketpair), map it and
check the pattern; then checks that the importer's bytes survive the
exporter's unmap and release, its primary context reset, and its SIGKILL
(the exporter then being a second child); reports what a descriptor never
imported holds (cuMemGetInfo before and after release, then after close)
and the allocation granularities. One JSON line per fact; it fails if any
fact fails. It needs a binary built with -tags cuda.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.size <= 0 || o.step <= 0 {
				return errors.New("--size and --step-timeout must be above 0")
			}
			if o.child != "" {
				return runVMMChild(cmd.Context(), o)
			}
			return runVMMCheck(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.device, "device", 0, "GPU index")
	f.StringVar(&o.driverPath, "driver-path", app.Defaults().GPUDriverPath, "CUDA driver library")
	f.Var(&sizeValue{&o.size}, "size", "bytes in each allocation (rounded up to the granularity)")
	f.DurationVar(&o.step, "step-timeout", time.Minute, "how long to wait for a child's answer")
	f.StringVar(&o.child, "child", "", "internal: run as the importer or exporter child, on descriptor 3")
	_ = f.MarkHidden("child")
	return cmd
}
