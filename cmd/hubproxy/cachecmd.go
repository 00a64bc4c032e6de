package main

import (
	"encoding/json"
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
	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/cachemaint"
)

// ErrCorrupt is returned by `cache verify` when it found corrupt blobs and
// did not remove them.
var ErrCorrupt = errors.New("corrupt blobs found (run again with --fix to delete them; they are refetched on demand)")

func newCacheCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Inspect and maintain a cache directory",
		Long: `cache works on a cache directory directly (--cache-dir, HUBPROXY_CACHE_DIR or the
config file); no server needs to run. ls and du only read. verify --fix and prune
delete files: a running server keeps serving correctly (it refetches what vanished),
but partials it is filling may fail once, so prefer a quiet cache. rm removes a
whole repo or revision, and so refuses a cache directory a server is using.`,
	}
	cmd.AddCommand(newCacheLsCmd(), newCacheDuCmd(), newCacheVerifyCmd(), newCachePruneCmd(), newCacheRmCmd(), newCacheStoreCmd(),
		newCachePinCmd(), newCacheUnpinCmd(), newCachePinsCmd())
	return cmd
}

// addCacheDirFlags declares the flags that locate the cache.
func addCacheDirFlags(f *pflag.FlagSet) {
	f.String("config", "", "config file (YAML); also HUBPROXY_CONFIG")
	f.String("cache-dir", defaultCacheDir(), "cache root")
}

func cacheDir(cmd *cobra.Command) (string, error) {
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return "", err
	}
	return cfg.CacheDir, nil
}

func newCacheLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List cached repositories: files, sizes, last access",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, configured, recorded, err := pinsInEffect(cmd)
			if err != nil {
				return err
			}
			pins := append(configured, recorded...)
			usage, err := cachemaint.Usage(dir)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), cacheLsJSON(usage, pins))
			}
			return printCacheLs(cmd.OutOrStdout(), usage, pins, time.Now())
		},
	}
	addCacheDirFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes)")
	return cmd
}

func printCacheLs(w io.Writer, usage []cachemaint.RepoUsage, pins []cache.Pin, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPO\tTYPE\tFILES\tSIZE\tPARTIAL\tREVISIONS\tPINNED\tLAST ACCESS")
	for _, u := range usage {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", u.Repo.ID(), u.Repo.Type(), u.Blobs, bytesize.Human(u.BlobBytes),
			partialCell(u), u.Snapshots, joinOrDash(pinCell(pins, u.Repo)), ago(u.LastAccess, now))
	}
	return tw.Flush()
}

// cacheLsRepo is one repository of `cache ls --json`. The field names are
// an interface scripts rely on: add fields, never rename them.
type cacheLsRepo struct {
	Repo         string     `json:"repo"` // as written on the command line: "org/name", "datasets/org/name"
	Type         string     `json:"type"`
	ID           string     `json:"id"`
	Files        int        `json:"files"`
	Bytes        int64      `json:"bytes"`
	PartialFiles int        `json:"partial_files"`
	PartialBytes int64      `json:"partial_bytes"`
	Revisions    int        `json:"revisions"`
	Pinned       []string   `json:"pinned"`      // "all", or the pinned revisions; empty when not pinned
	LastAccess   *time.Time `json:"last_access"` // null when unknown
}

func cacheLsJSON(usage []cachemaint.RepoUsage, pins []cache.Pin) map[string]any {
	repos := make([]cacheLsRepo, 0, len(usage))
	for _, u := range usage {
		r := cacheLsRepo{Repo: u.Repo.String(), Type: string(u.Repo.Type()), ID: u.Repo.ID(), Files: u.Blobs, Bytes: u.BlobBytes,
			PartialFiles: u.Partials, PartialBytes: u.PartialBytes, Revisions: u.Snapshots, Pinned: pinCell(pins, u.Repo)}
		if r.Pinned == nil {
			r.Pinned = []string{}
		}
		if !u.LastAccess.IsZero() {
			t := u.LastAccess.UTC()
			r.LastAccess = &t
		}
		repos = append(repos, r)
	}
	return map[string]any{"repos": repos}
}

// writeJSON prints v indented, as `hubproxy config --json` does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func partialCell(u cachemaint.RepoUsage) string {
	if u.Partials == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%s)", u.Partials, bytesize.Human(u.PartialBytes))
}

// ago prints a time with how long ago it was.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	var rel string
	switch {
	case d < time.Minute:
		rel = "just now"
	case d < time.Hour:
		rel = fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		rel = fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		rel = fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
	return t.Local().Format("2006-01-02 15:04") + " (" + rel + ")"
}

func newCacheDuCmd() *cobra.Command {
	var raw, asJSON bool
	cmd := &cobra.Command{
		Use:   "du",
		Short: "Bytes held per repository and in total: blobs plus partial files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := cacheDir(cmd)
			if err != nil {
				return err
			}
			usage, err := cachemaint.Usage(dir)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), cacheDuJSON(usage))
			}
			size := bytesize.Human
			if raw {
				size = func(n int64) string { return strconv.FormatInt(n, 10) }
			}
			return printCacheDu(cmd.OutOrStdout(), usage, size)
		},
	}
	addCacheDirFlags(cmd.Flags())
	cmd.Flags().BoolVar(&raw, "bytes", false, "print byte counts rather than KiB/MiB/GiB")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes)")
	return cmd
}

func printCacheDu(w io.Writer, usage []cachemaint.RepoUsage, size func(int64) string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "BLOBS\tPARTIAL\tTOTAL\t  REPO")
	var blobs, partial int64
	for _, u := range usage {
		blobs += u.BlobBytes
		partial += u.PartialBytes
		fmt.Fprintf(tw, "%s\t%s\t%s\t  %s\n", size(u.BlobBytes), size(u.PartialBytes), size(u.BlobBytes+u.PartialBytes), u.Repo)
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t  total (%s)\n", size(blobs), size(partial), size(blobs+partial), plural(len(usage), "repo"))
	return tw.Flush()
}

// duBytes is one line of `cache du --json`. As with cache ls, the field
// names are an interface: add fields, never rename them.
type duBytes struct {
	Blobs   int64 `json:"blob_bytes"`
	Partial int64 `json:"partial_bytes"`
	Total   int64 `json:"total_bytes"`
}

type duRepo struct {
	Repo string `json:"repo"`
	duBytes
}

type duTotal struct {
	Repos int `json:"repos"`
	duBytes
}

func cacheDuJSON(usage []cachemaint.RepoUsage) map[string]any {
	repos := make([]duRepo, 0, len(usage))
	var total duTotal
	for _, u := range usage {
		b := duBytes{Blobs: u.BlobBytes, Partial: u.PartialBytes, Total: u.BlobBytes + u.PartialBytes}
		repos = append(repos, duRepo{Repo: u.Repo.String(), duBytes: b})
		total.Repos++
		total.Blobs += b.Blobs
		total.Partial += b.Partial
		total.Total += b.Total
	}
	return map[string]any{"repos": repos, "total": total}
}

func newCacheVerifyCmd() *cobra.Command {
	var (
		fix     bool
		workers int
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Re-hash every blob and report those that do not match their name",
		Long: `verify re-hashes every complete blob (sha256 for 64-hex names, git blob sha1 for
40-hex ones) and lists the corrupt ones; it exits non-zero if it finds any. With
--fix it deletes them and the snapshot links pointing at them, so hubproxy (or
huggingface_hub) downloads them again on the next request.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := cacheDir(cmd)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			rep, err := cachemaint.Verify(cmd.Context(), dir, cachemaint.VerifyOptions{Fix: fix, Workers: workers})
			for _, c := range rep.Corrupt {
				what := "hashes to " + c.Got
				if c.Err != nil {
					what = "unreadable: " + c.Err.Error()
				}
				action := ""
				if c.Removed {
					action = " (removed)"
				}
				fmt.Fprintf(out, "CORRUPT %s %s (%s): %s%s\n", c.Repo, c.ETag, bytesize.Human(c.Size), what, action)
			}
			fmt.Fprintf(out, "verified %s (%s): %d corrupt\n", plural(rep.Checked, "blob"), bytesize.Human(rep.Bytes), len(rep.Corrupt))
			if err != nil {
				return err
			}
			if len(rep.Corrupt) > 0 && !fix {
				return ErrCorrupt
			}
			return nil
		},
	}
	addCacheDirFlags(cmd.Flags())
	cmd.Flags().BoolVar(&fix, "fix", false, "delete corrupt blobs and their snapshot links")
	cmd.Flags().IntVar(&workers, "jobs", 2, "blobs hashed at once")
	return cmd
}

func newCachePruneCmd() *cobra.Command {
	var (
		o        cachemaint.PruneOptions
		maxBytes = sizeValue{n: &o.MaxBytes}
	)
	o.StaleAfter = time.Hour
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove least recently used files down to a size, or unused for a while",
		Long: `prune removes whole files, least recently used first (by access time where the
filesystem records it, else by download time): those unused for --older-than, then
more until blobs and partials fit in --max-bytes. A blob goes with its snapshot
links, a repository left empty goes entirely, and orphaned temporary files go
too. Pinned repos (hubproxy cache pin, config key pins) are kept, and so are
partial files written within --stale-after, as a running server may be filling
them. Durations are written as in the config file: 90m, 36h, 720h (no days).`,
		Example: `  hubproxy cache prune --max-bytes 500GiB
  hubproxy cache prune --older-than 720h --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if !f.Changed("max-bytes") && !f.Changed("older-than") {
				return errors.New("give --max-bytes, --older-than or both")
			}
			if f.Changed("max-bytes") && o.MaxBytes == 0 {
				return errors.New("--max-bytes 0 would empty the cache; remove the directory instead")
			}
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			if o.Pins, err = cfg.ParsedPins(); err != nil {
				return err
			}
			rep, err := cachemaint.Prune(cmd.Context(), cfg.CacheDir, o)
			printPrune(cmd.OutOrStdout(), rep, o)
			return err
		},
	}
	addCacheDirFlags(cmd.Flags())
	f := cmd.Flags()
	f.Var(&maxBytes, "max-bytes", "target size of blobs plus partials (100GiB, 1.5TB, …)")
	f.Var(&durationValue{d: &o.OlderThan}, "older-than", "remove files unused for this long (90m, 36h, 720h)")
	f.Var(&durationValue{d: &o.StaleAfter}, "stale-after", "keep partial and temporary files written more recently than this")
	f.BoolVar(&o.DryRun, "dry-run", false, "print what would be removed, remove nothing")
	return cmd
}

func printPrune(w io.Writer, rep cachemaint.PruneReport, o cachemaint.PruneOptions) {
	verb := "removed"
	if o.DryRun {
		verb = "would remove"
	}
	now := time.Now()
	for _, r := range rep.Removed {
		kind := "blob"
		if r.Partial {
			kind = "partial"
		}
		name := r.Repo.String() + " " + kind + " " + r.ETag
		if r.Reason == "orphan" {
			name = "orphaned file " + r.ETag
		}
		fmt.Fprintf(w, "%s %s (%s, last used %s) [%s]\n", verb, name, bytesize.Human(r.Bytes), ago(r.LastAccess, now), r.Reason)
	}
	fmt.Fprintf(w, "%s %s, %s: cache %s -> %s", verb, plural(len(rep.Removed), "file"), bytesize.Human(rep.Freed),
		bytesize.Human(rep.Before), bytesize.Human(rep.After))
	if o.MaxBytes > 0 {
		fmt.Fprintf(w, " (target %s)", bytesize.Human(o.MaxBytes))
	}
	fmt.Fprintln(w)
	if rep.Pinned > 0 {
		fmt.Fprintf(w, "kept %s of pinned repos\n", bytesize.Human(rep.Pinned))
	}
	if rep.Over {
		fmt.Fprintln(w, "still over the target: the rest is pinned, or partial files written within --stale-after")
	}
}

// pruneLimits parses a prune's --max-bytes and --older-than (cache store
// prune's), at least one of which is required; a zero size would empty
// what empties says. Durations are the config file's (parseDuration), so a
// flag and a config key accept the same values.
func pruneLimits(maxBytes, olderThan, empties string) (size int64, age time.Duration, err error) {
	if maxBytes == "" && olderThan == "" {
		return 0, 0, errors.New("give --max-bytes, --older-than or both")
	}
	if maxBytes != "" {
		if size, err = bytesize.Parse(maxBytes); err != nil {
			return 0, 0, fmt.Errorf("--max-bytes: %w", err)
		}
		if size == 0 {
			return 0, 0, errors.New("--max-bytes 0 would empty " + empties)
		}
	}
	if olderThan != "" {
		if age, err = parseDuration(olderThan); err != nil {
			return 0, 0, fmt.Errorf("--older-than: %w", err)
		}
	}
	return size, age, nil
}

func newCacheRmCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rm REPO[@REV]",
		Short: "Remove a repository, or one revision of it, from the cache directory",
		Long: `rm removes REPO ("[datasets/|spaces/]namespace/name") from the cache directory,
as hf cache rm does: all of it, or with @REV (a branch or tag the cache knows, or
a commit) that revision's snapshot, the refs naming it, and the files only it
uses; files another cached revision also uses are kept. It refuses while a
server uses the cache directory (stop the server first); --dry-run only reads,
and says what would go. Pins are left as they are.`,
		Example: `  hubproxy cache rm org/model
  hubproxy cache rm --dry-run org/model@refs/pr/1
  hubproxy cache rm datasets/org/data@0123456789abcdef0123456789abcdef01234567`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The grammar of a pin, whose errors begin "pin": not rm's word.
			p, err := cache.ParsePin(args[0])
			if err != nil {
				return fmt.Errorf("%s (want [datasets/|spaces/]namespace/name[@revision])", strings.TrimPrefix(err.Error(), "pin "))
			}
			dir, err := cacheDir(cmd)
			if err != nil {
				return err
			}
			rep, err := cachemaint.Remove(cmd.Context(), dir, p.Repo, p.Rev, dryRun)
			if errors.Is(err, cache.ErrLocked) {
				return fmt.Errorf("%w; rm needs the cache to itself: stop the server first (or see what would go with --dry-run)", err)
			}
			if err != nil && len(rep.Commits) == 0 {
				return err
			}
			printRemove(cmd.OutOrStdout(), p, rep, dryRun)
			return err
		},
	}
	addCacheDirFlags(cmd.Flags())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, remove nothing")
	return cmd
}

func printRemove(w io.Writer, p cache.Pin, rep cachemaint.RemoveReport, dry bool) {
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	what := p.String()
	if p.Rev != "" && p.Rev != rep.Commits[0] {
		what += " (" + rep.Commits[0][:12] + ")"
	}
	fmt.Fprintf(w, "%s %s: %s, %s", verb, what, plural(len(rep.Blobs), "file"), bytesize.Human(rep.Bytes))
	if p.Rev == "" {
		fmt.Fprintf(w, ", %s", plural(len(rep.Commits), "revision"))
	}
	if rep.Kept > 0 {
		fmt.Fprintf(w, "; kept %s another cached revision uses", plural(rep.Kept, "file"))
	}
	fmt.Fprintln(w)
}
