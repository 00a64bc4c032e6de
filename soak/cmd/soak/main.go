// Command soak runs hubproxy under hostile traffic against an oracle (see
// package soak). `make soak` runs it for ten minutes; `make soak-ci` for two.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hubproxy/hubproxy/soak"
)

func main() {
	var cfg soak.Config
	flag.StringVar(&cfg.Bin, "hubproxy", "bin/hubproxy", "the hubproxy binary to soak")
	flag.DurationVar(&cfg.Duration, "duration", soak.DefaultDuration, "how long the chaos runs (warm-up and the quiet phase come on top)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the chaos schedule, the faults and the workload (0: from the clock)")
	flag.IntVar(&cfg.Clients, "clients", soak.DefaultClients, "concurrent clients")
	flag.IntVar(&cfg.Crashy, "crashy", soak.DefaultCrashy, "hubproxy processes that get killed (one more never is)")
	flag.StringVar(&cfg.MinIO, "minio", os.Getenv("HUBPROXY_MINIO"), "the MinIO binary the shared store runs on (`make minio` builds it; default $HUBPROXY_MINIO)")
	flag.BoolVar(&cfg.NoStore, "no-store", false, "run the proxies without a shared store (and without its chaos)")
	flag.DurationVar(&cfg.Warmup, "warmup", soak.DefaultWarmup, "traffic before the chaos, after which the leak baseline is taken")
	flag.StringVar(&cfg.WorkDir, "workdir", "", "keep caches and logs here (default: a temporary directory, removed after a pass)")
	flag.BoolVar(&cfg.NoTmpfs, "no-tmpfs", false, "cache on the work directory's filesystem (no root needed), without the disk-fill chaos")
	flag.StringVar(&cfg.ReportPath, "report", "", "also write the figures as Markdown to this file")
	flag.Parse()
	cfg.Out = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := soak.Run(ctx, cfg); err != nil {
		if !errors.Is(err, soak.ErrFailed) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}
