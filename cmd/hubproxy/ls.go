package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

func newLsCmd() *cobra.Command {
	var (
		rev, file, server string
		asJSON            bool
	)
	cmd := &cobra.Command{
		Use:   "ls <repo>",
		Short: "List the tensors of a safetensors model, from its headers only",
		Long: `ls reads only the safetensors headers of a model (one range request per shard)
and prints every tensor with its dtype, shape, size and file.

With --server it asks a running hubproxy (and so uses, and fills, its cache);
without, it reads straight from the upstream through a cache in --cache-dir.`,
		Example: `  hubproxy ls Qwen/Qwen3-0.6B
  hubproxy ls --server http://localhost:8080 --json org/model`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/models/" + args[0] + "/tensors?" + url.Values{"revision": {rev}, "file": nonEmpty(file)}.Encode()
			body, err := fetchListing(cmd, server, path)
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var l tensor.Listing
			if err := json.Unmarshal(body, &l); err != nil {
				return fmt.Errorf("decoding the listing: %w", err)
			}
			return printListing(cmd.OutOrStdout(), &l)
		},
	}
	f := cmd.Flags()
	f.StringVar(&rev, "revision", "main", "branch, tag or commit")
	f.StringVar(&file, "file", "", "safetensors file or index to read (default: found like the hub clients do)")
	f.StringVar(&server, "server", os.Getenv("HUBPROXY_SERVER"), "URL of a running hubproxy (default: read the upstream directly; also HUBPROXY_SERVER)")
	f.BoolVar(&asJSON, "json", false, "print the listing as JSON")
	f.String("config", "", "config file (YAML); also HUBPROXY_CONFIG")
	f.String("upstream", app.Defaults().Upstream, "hub to read from when --server is not set")
	f.String("cache-dir", defaultCacheDir(), "cache to read through when --server is not set")
	return cmd
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// fetchListing GETs path from a running hubproxy, or from one built in
// process over the configured upstream and cache.
func fetchListing(cmd *cobra.Command, server, path string) ([]byte, error) {
	var resp *http.Response
	if server != "" {
		r, err := http.Get(strings.TrimSuffix(server, "/") + path)
		if err != nil {
			return nil, err
		}
		resp = r
	} else {
		cfg, err := loadConfig(cmd.Flags())
		if err != nil {
			return nil, err
		}
		handler, cleanup, err := app.New(cfg, nil)
		if err != nil {
			return nil, lockedHint(err)
		}
		defer cleanup()
		req := httptest.NewRequestWithContext(cmd.Context(), http.MethodGet, path, nil)
		if tok := cfg.UpstreamToken; tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		resp = rec.Result()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s (HTTP %d)", e.Error, resp.StatusCode)
		}
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return body, nil
}

func printListing(w io.Writer, l *tensor.Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tDTYPE\tSHAPE\tSIZE\tFILE\n")
	for _, t := range l.Tensors {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.DType, shape(t.Shape), humanBytes(t.Length), t.File)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s@%s (%s): %d tensors in %d file(s), %s, %s parameters\n",
		l.Repo, l.Revision, l.Commit[:min(12, len(l.Commit))], l.Totals.Tensors, len(l.Files),
		humanBytes(l.Totals.Bytes), humanCount(l.Totals.Parameters))
	return err
}

func shape(s []uint64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return strconv.FormatUint(n, 10)
}

// lockedHint adds what to do when a command meets a cache directory that a
// running server holds.
func lockedHint(err error) error {
	if errors.Is(err, cache.ErrLocked) {
		return fmt.Errorf("%w; pass --server URL to go through the running hubproxy", err)
	}
	return err
}
