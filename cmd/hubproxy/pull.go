package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/bytesize"
	"github.com/hubproxy/hubproxy/internal/hub"
)

type pullOptions struct {
	repo     hub.Repo
	revision string
	include  []string // huggingface_hub's allow_patterns (hub.SelectFile)
	exclude  []string // its ignore_patterns
	files    []string // exact paths, as hf download REPO FILE... takes them
	jobs     int
	progress string
}

func newPullCmd() *cobra.Command {
	var (
		o                                 pullOptions
		remote                            remoteFlags
		repoType, progressMode, adminAddr string
	)
	cmd := &cobra.Command{
		Use:   "pull REPO [FILE...]",
		Short: "Prefetch a repository into the cache",
		Long: `pull downloads every file of a repository, or the FILEs named, or those that
--include and --exclude select, so that later requests are served from the cache.

--include and --exclude are huggingface_hub's allow_patterns and ignore_patterns:
shell-style patterns matched against the whole path, where * also matches "/"
("original/*" is everything under original/), and a pattern ending in "/" means
the folder's whole content. A file is pulled if it matches an --include (or none
is given) and no --exclude.

With --server it fills that hubproxy's cache. Where its admin API is reachable
(--admin; by default HUBPROXY_ADMIN_LISTEN, or serve's default socket for a server
on this machine) the server does it itself and pull shows its progress; else pull
downloads every file through it, which fills its cache too but moves every byte
to this machine (it says so). Without --server, it runs hubproxy in process over
--upstream and fills --cache-dir directly; it refuses a cache directory a running
server is using (use --server then). With no flag saying which, HF_ENDPOINT, if
set, names the hubproxy to go through (unless it is the Hugging Face Hub itself).

Each file is reported as a hit (the server had it) or fetched. Progress is a
single updating line on a terminal, plain lines otherwise.`,
		Example: `  hubproxy pull --server http://hubproxy:8080 Qwen/Qwen3-0.6B
  hubproxy pull --cache-dir /models/cache --include '*.safetensors' --include '*.json' org/model
  hubproxy pull --include 'original/' --exclude '*.pth' org/model
  hubproxy pull org/model config.json tokenizer.json
  hubproxy pull --repo-type dataset org/data`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, id := hub.Model, args[0]
			if rest, ok := strings.CutPrefix(id, "datasets/"); ok {
				typ, id = hub.Dataset, rest
			} else if t, ok := hub.ParseRepoType(repoType + "s"); ok {
				typ = t
			} else {
				return fmt.Errorf("--repo-type %q: want model, dataset or space", repoType)
			}
			repo, err := hub.ParseRepo(typ, id)
			if err != nil {
				return err
			}
			if err := hub.ValidRevision(o.revision); err != nil {
				return err
			}
			o.files = args[1:]
			if len(o.files) > 0 && len(o.include)+len(o.exclude) > 0 {
				return errors.New("give file names or --include/--exclude, not both: the names already say which files to pull")
			}
			for _, f := range o.files {
				if err := hub.ValidPath(f); err != nil {
					return fmt.Errorf("file %q: %w", f, err)
				}
			}
			o.repo, o.progress = repo, progressMode
			c, cleanup, err := remote.connect(cmd)
			if err != nil {
				return err
			}
			defer cleanup()
			if c.base != inProcessURL {
				addr, why := adminTarget(adminAddr, c.base)
				if addr != "" {
					err := prefetchOnServer(cmd.Context(), addr, c.token, o, cmd.OutOrStdout())
					var np *errNoPrefetch
					if !errors.As(err, &np) {
						return err
					}
					why = np.why
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "note: not prefetching server-side: %s; streaming every byte back to this machine instead\n", why)
			}
			return runPull(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.revision, "revision", "main", "branch, tag or commit")
	f.Var(&patternsValue{&o.include}, "include", "pull only files whose path matches this pattern, as allow_patterns (repeatable)")
	f.Var(&patternsValue{&o.exclude}, "exclude", "skip files whose path matches this pattern, as ignore_patterns (repeatable)")
	f.StringVar(&repoType, "repo-type", "model", "model, dataset or space")
	f.IntVar(&o.jobs, "jobs", 4, "files downloaded at once")
	f.StringVar(&progressMode, "progress", progressAuto, "auto, bar, plain or none")
	f.StringVar(&adminAddr, "admin", "", "admin API of the --server hubproxy, unix:///path or host:port, to prefetch server-side (default: HUBPROXY_ADMIN_LISTEN, or serve's default socket for a server on this machine)")
	addRemoteFlags(f, &remote, "cache to fill when --server is not set")
	return cmd
}

// remoteFile is one file of the listing.
type remoteFile struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// SizeMismatchError reports a download whose length differs from the listing.
type SizeMismatchError struct {
	Path      string
	Want, Got int64
}

func (e *SizeMismatchError) Error() string {
	// Exact counts, not sizes: a few bytes short is the information.
	return fmt.Sprintf("%s: received %s, the listing says %d", e.Path, plural(e.Got, "byte"), e.Want)
}

// commit resolves rev to a commit through the repo info API.
func (c *hubClient) commit(ctx context.Context, repo hub.Repo, rev string) (string, error) {
	resp, err := c.get(ctx, c.base+"/api/"+repo.Type().Plural()+"/"+repo.ID()+"/revision/"+url.PathEscape(rev))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var info struct{ SHA string }
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return "", fmt.Errorf("decoding the repo info: %w", err)
	}
	if !hub.IsCommit(info.SHA) {
		return "", fmt.Errorf("the repo info of %s names no commit", repo)
	}
	return info.SHA, nil
}

var nextLinkRE = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// list returns every file at commit, following the tree's pagination.
func (c *hubClient) list(ctx context.Context, repo hub.Repo, commit string) ([]remoteFile, error) {
	next := c.base + "/api/" + repo.Type().Plural() + "/" + repo.ID() + "/tree/" + commit + "?recursive=true&expand=false"
	var files []remoteFile
	for pages := 0; next != ""; pages++ {
		if pages > 100_000 {
			return nil, errors.New("the tree listing does not end")
		}
		resp, err := c.get(ctx, next)
		if err != nil {
			return nil, err
		}
		var page []remoteFile
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("decoding the tree listing: %w", err)
		}
		for _, f := range page {
			if f.Type == "file" {
				files = append(files, f)
			}
		}
		next = ""
		if m := nextLinkRE.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
			next = m[1]
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// cacheHeader is the header hubproxy answers a file GET with: whether the
// file was a hit (all of it cached), partly cached, or a miss.
const cacheHeader = "X-Hubproxy-Cache"

// How a file came: what cacheHeader said, or unknown from a server that
// is no hubproxy.
const (
	cameHit     = "hit"
	cameMiss    = "miss"
	camePartial = "partial"
	cameUnknown = ""
)

// fetch downloads one file at commit through the proxy, which caches it,
// checks its length against the listing, and says how it came (cacheHeader).
func (c *hubClient) fetch(ctx context.Context, repo hub.Repo, commit string, f remoteFile, prog *progress) (string, error) {
	segs := strings.Split(f.Path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	resp, err := c.get(ctx, c.base+"/"+repo.Type().URLPrefix()+repo.ID()+"/resolve/"+commit+"/"+strings.Join(segs, "/"))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	n, err := io.Copy(prog, resp.Body)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.Path, err)
	}
	if n != f.Size {
		return "", &SizeMismatchError{Path: f.Path, Want: f.Size, Got: n}
	}
	switch came := resp.Header.Get(cacheHeader); came {
	case cameHit, cameMiss, camePartial:
		return came, nil
	}
	return cameUnknown, nil
}

// selectFiles picks the files o names, or those its patterns select.
// A named file the listing lacks is an error naming it.
func selectFiles(all []remoteFile, o pullOptions) ([]remoteFile, error) {
	var files []remoteFile
	if len(o.files) > 0 {
		byPath := make(map[string]remoteFile, len(all))
		for _, f := range all {
			byPath[f.Path] = f
		}
		var missing []string
		for _, name := range o.files {
			f, ok := byPath[name]
			if !ok {
				missing = append(missing, name)
				continue
			}
			if !slices.ContainsFunc(files, func(g remoteFile) bool { return g.Path == name }) {
				files = append(files, f)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%s@%s has no file %s (of %s; paths are relative to the repo root)",
				o.repo, o.revision, strings.Join(quoteAll(missing), ", "), plural(len(all), "file"))
		}
		return files, nil
	}
	for _, f := range all {
		if hub.SelectFile(f.Path, o.include, o.exclude) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s@%s: no file matches --include %q --exclude %q (of %s)", o.repo, o.revision, o.include, o.exclude, plural(len(all), "file"))
	}
	return files, nil
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Quote(v)
	}
	return out
}

// patternsValue is a repeatable --include or --exclude. Every fnmatch
// pattern is valid, so Set only collects.
type patternsValue struct{ p *[]string }

func (v *patternsValue) Set(s string) error {
	if s == "" {
		return errors.New("an empty pattern matches no file")
	}
	*v.p = append(*v.p, s)
	return nil
}
func (v *patternsValue) Type() string   { return "pattern" }
func (v *patternsValue) String() string { return strings.Join(*v.p, ",") }

// runPull lists, filters and downloads, jobs files at a time.
func runPull(ctx context.Context, c *hubClient, o pullOptions, out io.Writer) error {
	commit, err := c.commit(ctx, o.repo, o.revision)
	if err != nil {
		return err
	}
	all, err := c.list(ctx, o.repo, commit)
	if err != nil {
		return err
	}
	files, err := selectFiles(all, o)
	if err != nil {
		return err
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	fmt.Fprintf(out, "pulling %s@%s (%s): %s, %s\n", o.repo, o.revision, commit[:12], plural(len(files), "file"), bytesize.Human(total))

	prog := newProgress(out, o.progress, total)
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	progDone := make(chan struct{})
	go func() { defer close(progDone); prog.run(ctx) }()

	work := make(chan remoteFile)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		hits int
	)
	for range max(1, o.jobs) {
		wg.Go(func() {
			for f := range work {
				prog.startFile(f.Path, f.Size)
				came, err := c.fetch(ctx, o.repo, commit, f, prog)
				if err != nil {
					prog.abandonFile(f.Path)
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel() // the first failure stops the pull
					continue
				}
				if came == cameHit {
					mu.Lock()
					hits++
					mu.Unlock()
				}
				prog.finishFile(f.Path, f.Size, came)
			}
		})
	}
feed:
	for _, f := range files {
		select {
		case work <- f:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	cancel()
	<-progDone
	prog.finish()
	if err := parent.Err(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs[0]
	}
	elapsed := time.Since(prog.start).Round(time.Millisecond)
	fmt.Fprintf(out, "pulled %s (%s) of %s at %s in %s%s\n", plural(len(files), "file"), bytesize.Human(total), o.repo, commit, elapsed, hitSummary(hits, len(files)))
	return nil
}

// hitSummary says how many of n files the server already had.
func hitSummary(hits, n int) string {
	switch {
	case hits == 0:
		return ""
	case hits == n:
		return ": all already cached"
	}
	return fmt.Sprintf(": %d already cached, %d fetched", hits, n-hits)
}
