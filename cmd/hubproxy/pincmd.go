package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/cachemaint"
	"github.com/hubproxy/hubproxy/internal/hub"
)

// newCachePinCmd, newCacheUnpinCmd and newCachePinsCmd manage the pins the
// cache directory records; the `pins` config key adds more.
func newCachePinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pin REPO[@REV]",
		Short: "Keep a repo's files (or one revision's) from eviction and prune, here and in the shared store",
		Long: `pin records REPO ("[datasets/|spaces/]namespace/name") in the cache directory's
pin list. Its files the cache holds are never evicted or pruned; with @REV, only
the files of that revision (a branch follows its moves). A running server reads
the list at its next eviction; no restart is needed. pin does not download
anything: pull the model to have it all. A repo not cached yet can be pinned
(a note says so): its files are kept from the moment they are fetched.`,
		Example: `  hubproxy cache pin meta-llama/Llama-3.1-8B-Instruct@main
  hubproxy cache pin datasets/org/eval-set`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := changePin(cmd, args[0], cachemaint.AddPin, "pinned", "already pinned")
			if err != nil {
				return err
			}
			return noteUncachedPin(cmd, p)
		},
	}
	addCacheDirFlags(cmd.Flags())
	return cmd
}

func newCacheUnpinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unpin REPO[@REV]",
		Short: "Remove a pin that cache pin recorded",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := changePin(cmd, args[0], cachemaint.RemovePin, "unpinned", "not pinned in the cache directory")
			return err
		},
	}
	addCacheDirFlags(cmd.Flags())
	return cmd
}

func changePin(cmd *cobra.Command, arg string, change func(string, cache.Pin) (bool, error), did, didNot string) (cache.Pin, error) {
	p, err := cache.ParsePin(arg)
	if err != nil {
		return p, err
	}
	dir, err := cacheDir(cmd)
	if err != nil {
		return p, err
	}
	changed, err := change(dir, p)
	if err != nil {
		return p, err
	}
	if changed {
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", did, p)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", p, didNot)
	}
	return p, nil
}

// noteUncachedPin tells, on stderr, that a pin covers no file of the cache
// yet: a typo in the repo id looks just like that, and a pin made before
// its pull is fine but keeps nothing until then.
func noteUncachedPin(cmd *cobra.Command, p cache.Pin) error {
	dir, err := cacheDir(cmd)
	if err != nil {
		return err
	}
	entries, err := cachemaint.List(dir)
	if err != nil {
		return err
	}
	cover := cache.ResolvePins(dir, []cache.Pin{p})
	for _, e := range entries {
		if cover.Covers(e.Repo, e.ETag) {
			return nil
		}
	}
	pull := "hubproxy pull " + p.Repo.ID()
	if t := p.Repo.Type(); t != hub.Model {
		pull += " --repo-type " + string(t)
	}
	if p.Rev != "" {
		pull += " --revision " + p.Rev
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "note: %s is not in the cache yet; it is pinned anyway, and its files are kept once fetched (%s)\n", p, pull)
	return nil
}

func newCachePinsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pins",
		Short: "List the pins in effect: the cache directory's and the configuration's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, configured, recorded, err := pinsInEffect(cmd)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(configured)+len(recorded) == 0 {
				fmt.Fprintf(w, "no pins (config key pins, or hubproxy cache pin, in %s)\n", dir)
			}
			for _, p := range configured {
				fmt.Fprintf(w, "%s\t(config)\n", p)
			}
			for _, p := range recorded {
				fmt.Fprintf(w, "%s\t(cache pin)\n", p)
			}
			return nil
		},
	}
	addCacheDirFlags(cmd.Flags())
	return cmd
}

// pinsInEffect returns the cache directory, the configured pins and those
// the directory records.
func pinsInEffect(cmd *cobra.Command) (dir string, configured, recorded []cache.Pin, err error) {
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return "", nil, nil, err
	}
	if configured, err = cfg.ParsedPins(); err != nil {
		return "", nil, nil, err
	}
	recorded, err = cache.ReadPins(cfg.CacheDir)
	return cfg.CacheDir, configured, recorded, err
}

// pinCell is what `cache ls` shows of repo's pins: "all" for the whole repo,
// else its pinned revisions, "-" for none.
func pinCell(pins []cache.Pin, repo hub.Repo) []string {
	var revs []string
	for _, p := range pins {
		if p.Repo != repo {
			continue
		}
		if p.Rev == "" {
			return []string{"all"}
		}
		if !slices.Contains(revs, p.Rev) {
			revs = append(revs, p.Rev)
		}
	}
	return revs
}

func joinOrDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}
