package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"sort"
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
	include  []string
	jobs     int
	progress string
}

func newPullCmd() *cobra.Command {
	var (
		o                      pullOptions
		remote                 remoteFlags
		repoType, progressMode string
	)
	cmd := &cobra.Command{
		Use:   "pull <repo>",
		Short: "Prefetch a repository into the cache",
		Long: `pull downloads every file of a repository (or those matching --include) so that
later requests are served from the cache.

With --server it goes through a running hubproxy, filling that server's cache.
Without, it runs hubproxy in process over --upstream and fills --cache-dir directly;
it refuses a cache directory a running server is using (use --server then).

Progress is a single updating line on a terminal, plain lines otherwise.`,
		Example: `  hubproxy pull --server http://hubproxy:8080 Qwen/Qwen3-0.6B
  hubproxy pull --cache-dir /models/cache --include '*.safetensors' --include '*.json' org/model
  hubproxy pull --repo-type dataset org/data`,
		Args: cobra.ExactArgs(1),
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
			for _, g := range o.include {
				if _, err := path.Match(g, ""); err != nil {
					return fmt.Errorf("--include %q: %w", g, err)
				}
			}
			o.repo, o.progress = repo, progressMode
			c, cleanup, err := remote.connect(cmd)
			if err != nil {
				return err
			}
			defer cleanup()
			return runPull(cmd.Context(), c, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.revision, "revision", "main", "branch, tag or commit")
	f.StringArrayVar(&o.include, "include", nil, "only files whose path or base name matches this glob (repeatable)")
	f.StringVar(&repoType, "repo-type", "model", "model, dataset or space")
	f.IntVar(&o.jobs, "jobs", 4, "files downloaded at once")
	f.StringVar(&progressMode, "progress", progressAuto, "auto, bar, plain or none")
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

// fetch downloads one file at commit through the proxy, which caches it,
// and checks its length against the listing.
func (c *hubClient) fetch(ctx context.Context, repo hub.Repo, commit string, f remoteFile, prog *progress) error {
	segs := strings.Split(f.Path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	resp, err := c.get(ctx, c.base+"/"+repo.Type().URLPrefix()+repo.ID()+"/resolve/"+commit+"/"+strings.Join(segs, "/"))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(prog, resp.Body)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	if n != f.Size {
		return &SizeMismatchError{Path: f.Path, Want: f.Size, Got: n}
	}
	return nil
}

// matches reports whether p matches any glob, by full path or base name.
// No globs match everything.
func matches(p string, globs []string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, p); ok {
			return true
		}
		if ok, _ := path.Match(g, path.Base(p)); ok {
			return true
		}
	}
	return false
}

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
	var files []remoteFile
	var total int64
	for _, f := range all {
		if matches(f.Path, o.include) {
			files = append(files, f)
			total += f.Size
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("%s@%s: no file matches %q (of %s)", o.repo, o.revision, o.include, plural(len(all), "file"))
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
	)
	for range max(1, o.jobs) {
		wg.Go(func() {
			for f := range work {
				prog.startFile(f.Path)
				if err := c.fetch(ctx, o.repo, commit, f, prog); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel() // the first failure stops the pull
					continue
				}
				prog.finishFile(f.Path, f.Size)
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
	fmt.Fprintf(out, "pulled %s (%s) of %s at %s in %s\n", plural(len(files), "file"), bytesize.Human(total), o.repo, commit, elapsed)
	return nil
}
