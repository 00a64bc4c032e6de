package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hubproxy/hubproxy/internal/bytesize"
	"github.com/hubproxy/hubproxy/internal/cachemaint"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// `hubproxy cache store` inspects and prunes the cluster's shared store, as
// `hubproxy cache` does a node's directory. The store is keyed by content
// hash, so files are listed by ETag: which repo a hash belongs to is the
// hub's to say, per caller.
func newCacheStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Inspect and prune the cluster's shared store (--shared-store)",
		Long: `store works on the shared store directly (--shared-store, HUBPROXY_SHARED_STORE or
the config file; S3 credentials from the usual AWS variables). ls and du only
read; prune deletes whole files' chunks, which nodes fetch again from upstream
when next asked, and the objects of older store layouts. None of them checks
chunks' seals, so none needs the cluster's shared-store secret.`,
	}
	cmd.AddCommand(newStoreLsCmd(), newStoreDuCmd(), newStorePruneCmd())
	return cmd
}

func addStoreFlags(f *pflag.FlagSet) {
	f.String("config", "", "config file (YAML); also HUBPROXY_CONFIG")
	f.String("cache-dir", defaultCacheDir(), "this node's cache root, through which pins are resolved")
	f.String("shared-store", "", "the shared store: s3://BUCKET[/PREFIX][?endpoint=URL&region=R&use_path_style=true] or file:///DIR")
}

// openStore opens the configured shared store; an unreachable one is an
// error here, as there is nothing to fall back to. readOnly skips the write
// probe, for commands that only list.
func openStore(cmd *cobra.Command, readOnly bool) (*sharedstore.Store, error) {
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return nil, err
	}
	if cfg.SharedStore == "" {
		return nil, errors.New("no shared store: give --shared-store (or HUBPROXY_SHARED_STORE)")
	}
	// The AWS SDK logs through this (to stderr, never into the
	// command's output), at log-level, like serve's.
	log, err := newLogger(cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	return sharedstore.Open(ctx, cfg.SharedStore, sharedstore.Options{ReadOnly: readOnly, Logger: log.With("component", "sharedstore")})
}

// takeInventory opens the configured store and lists what it holds.
func takeInventory(cmd *cobra.Command) (sharedfill.Inventory, *sharedstore.Store, error) {
	s, err := openStore(cmd, true)
	if err != nil {
		return sharedfill.Inventory{}, nil, err
	}
	inv, err := sharedfill.Take(cmd.Context(), s, time.Now())
	return inv, s, err
}

func newStoreLsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the files in the shared store: content hash, chunks, size, last put",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, _, err := takeInventory(cmd)
			if err != nil {
				return err
			}
			return printStoreLs(cmd.OutOrStdout(), inv, time.Now())
		},
	}
	addStoreFlags(cmd.Flags())
	return cmd
}

func printStoreLs(w io.Writer, inv sharedfill.Inventory, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ETAG\tCHUNKS\tSIZE\tLAST PUT")
	for _, f := range inv.Files {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", f.ETag, f.Chunks, bytesize.Human(f.Bytes), ago(f.LastPut, now))
	}
	return tw.Flush()
}

func newStoreDuCmd() *cobra.Command {
	var raw bool
	cmd := &cobra.Command{
		Use:   "du",
		Short: "Bytes the shared store holds, and its chunk claims",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, s, err := takeInventory(cmd)
			if err != nil {
				return err
			}
			size := bytesize.Human
			if raw {
				size = func(n int64) string { return strconv.FormatInt(n, 10) }
			}
			chunks := 0
			for _, f := range inv.Files {
				chunks += f.Chunks
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s in %s of %s (%s)\n", size(inv.Bytes()), plural(chunks, "chunk"), plural(len(inv.Files), "file"), s)
			fmt.Fprintf(out, "%s in flight or left by nodes that died (%d older than an hour)\n", plural(inv.Claims, "claim"), inv.StaleClaims)
			if inv.Old > 0 {
				fmt.Fprintf(out, "%s in %s of older layouts (v1/, v2/), which no node reads: prune deletes them\n",
					size(inv.OldBytes), plural(inv.Old, "object"))
			}
			return nil
		},
	}
	addStoreFlags(cmd.Flags())
	cmd.Flags().BoolVar(&raw, "bytes", false, "print byte counts rather than KiB/MiB/GiB")
	return cmd
}

func newStorePruneCmd() *cobra.Command {
	var (
		maxBytes, olderThan string
		dryRun              bool
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove files from the shared store: put longer ago than --older-than, then oldest first down to --max-bytes",
		Long: `prune removes whole files' chunks from the shared store. Object stores keep no
access time, so files go by when their newest chunk was put: those older than
--older-than, then the oldest until the rest fit in --max-bytes. Claims left by
nodes that died (older than an hour) go too, and so does every object of an
older store layout (v1/, v2/), which no node reads. Files of pinned repos are kept:
the store knows files only by content hash, so pins are resolved through this
node's cache directory (--cache-dir), which must hold the pinned models; run
prune on a node that has them. Nodes fetch a pruned file from
upstream again when next asked. A lifecycle rule on the bucket does the same
by age without this command.`,
		Example: `  hubproxy cache store prune --shared-store s3://models-cache/hubproxy --older-than 720h
  hubproxy cache store prune --max-bytes 20TiB --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var o sharedfill.PruneOptions
			var err error
			if o.MaxBytes, o.OlderThan, err = pruneLimits(maxBytes, olderThan, "the store; delete its prefix instead"); err != nil {
				return err
			}
			o.DryRun = dryRun
			keep, err := storePins(cmd)
			if err != nil {
				return err
			}
			if len(keep) > 0 {
				o.Keep = func(etag string) bool { return keep[etag] }
				fmt.Fprintf(cmd.OutOrStdout(), "keeping %s of pinned repos\n", plural(len(keep), "file"))
			}
			s, err := openStore(cmd, false)
			if err != nil {
				return err
			}
			rep, err := sharedfill.Prune(cmd.Context(), s, o, time.Now())
			printStorePrune(cmd.OutOrStdout(), rep, o)
			return err
		},
	}
	addStoreFlags(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&maxBytes, "max-bytes", "", "target size of the store's chunks (20TiB, …)")
	f.StringVar(&olderThan, "older-than", "", "remove files whose newest chunk was put longer ago (90m, 36h, 720h)")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be removed, remove nothing")
	return cmd
}

// storePins returns the content hashes of the files pins cover in this
// node's cache directory. Pins whose files it does not hold are an error:
// prune would otherwise remove what they were meant to keep.
func storePins(cmd *cobra.Command) (map[string]bool, error) {
	dir, configured, recorded, err := pinsInEffect(cmd)
	if err != nil || len(configured)+len(recorded) == 0 {
		return nil, err
	}
	keep, unresolved, err := cachemaint.PinnedETags(dir, configured)
	if err != nil {
		return nil, fmt.Errorf("resolving pins through %s: %w", dir, err)
	}
	if len(unresolved) > 0 {
		names := make([]string, len(unresolved))
		for i, p := range unresolved {
			names[i] = p.String()
		}
		return nil, fmt.Errorf("%s holds none of the files of %s, so prune cannot tell which chunks to keep for %s; run it on a node that has the pinned models",
			dir, strings.Join(names, ", "), plural(len(names), "pin"))
	}
	return keep, nil
}

func printStorePrune(w io.Writer, rep sharedfill.PruneReport, o sharedfill.PruneOptions) {
	verb := "removed"
	if o.DryRun {
		verb = "would remove"
	}
	now := time.Now()
	for _, r := range rep.Removed {
		fmt.Fprintf(w, "%s %s (%s, %s, last put %s) [%s]\n", verb, r.ETag, plural(r.Chunks, "chunk"), bytesize.Human(r.Bytes), ago(r.LastPut, now), r.Reason)
	}
	fmt.Fprintf(w, "%s %s, %s: store %s -> %s", verb, plural(len(rep.Removed), "file"), bytesize.Human(rep.Freed),
		bytesize.Human(rep.Before), bytesize.Human(rep.After))
	if o.MaxBytes > 0 {
		fmt.Fprintf(w, " (target %s)", bytesize.Human(o.MaxBytes))
	}
	fmt.Fprintf(w, "; %s %s\n", verb, plural(rep.Claims, "stale claim"))
	if rep.Old > 0 {
		fmt.Fprintf(w, "%s %s (%s) of older layouts, which no node reads\n", verb, plural(rep.Old, "object"), bytesize.Human(rep.OldBytes))
	}
	if rep.Over {
		fmt.Fprintln(w, "still over the target")
	}
}
