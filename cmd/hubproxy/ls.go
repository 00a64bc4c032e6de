package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/bytesize"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

func newLsCmd() *cobra.Command {
	var (
		rev, file string
		remote    remoteFlags
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "ls <repo>",
		Short: "List the tensors of a safetensors model, from its headers only",
		Long: `ls reads only the safetensors headers of a model (one range request per shard)
and prints every tensor with its dtype, shape, size and file.

With --server it asks a running hubproxy (and so uses, and fills, its cache);
without, it reads straight from the upstream through a cache in --cache-dir.
With no flag saying which, HF_ENDPOINT, if set, names the hubproxy to ask
(unless it is the Hugging Face Hub itself). Either way it sends --token
(default $HF_TOKEN), as pull does.`,
		Example: `  hubproxy ls Qwen/Qwen3-0.6B
  hubproxy ls --server localhost:8080 --json org/model`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cleanup, err := remote.connect(cmd)
			if err != nil {
				return err
			}
			defer cleanup()
			path := "/models/" + args[0] + "/tensors?" + url.Values{"revision": {rev}, "file": nonEmpty(file)}.Encode()
			body, err := fetchListing(cmd.Context(), c, path)
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
	f.BoolVar(&asJSON, "json", false, "print the listing as JSON")
	addRemoteFlags(f, &remote, "cache to read through when --server is not set")
	return cmd
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// fetchListing GETs the tensor listing at path.
func fetchListing(ctx context.Context, c *hubClient, path string) ([]byte, error) {
	resp, err := c.get(ctx, c.base+path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the listing: %w", err)
	}
	return body, nil
}

func printListing(w io.Writer, l *tensor.Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tDTYPE\tSHAPE\tSIZE\tFILE\n")
	for _, t := range l.Tensors {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.DType, shape(t.Shape), bytesize.Human(int64(t.Length)), t.File)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s@%s (%s): %s in %s, %s, %s parameters\n",
		l.Repo, l.Revision, l.Commit[:min(12, len(l.Commit))], plural(l.Totals.Tensors, "tensor"), plural(len(l.Files), "file"),
		bytesize.Human(int64(l.Totals.Bytes)), humanCount(l.Totals.Parameters))
	return err
}

func shape(s []uint64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// plural counts n of noun in words: "1 file", "2 files", "0 repos".
func plural[N ~int | ~int64 | ~uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprint(n) + " " + noun + "s"
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
