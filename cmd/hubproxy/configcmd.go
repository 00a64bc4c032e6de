package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// newConfigCmd prints the configuration serve would run with, each key's
// value and where it came from, secrets hidden. It takes serve's flags, so
// `hubproxy config --cache-max-bytes 50Gi` previews a change.
func newConfigCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration and where each key comes from",
		Long: `config prints every configuration key with the value hubproxy serve would use and
its source: the default, the config file (--config or HUBPROXY_CONFIG), an
environment variable (HUBPROXY_<KEY>) or a flag, in increasing precedence.
Secrets are never printed. Invalid values and unknown keys fail here exactly as
they fail serve (the same checks, listen addresses and log settings included).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := loadServe(cmd.Flags())
			if err != nil {
				return err
			}
			return printConfig(cmd, l, asJSON)
		},
	}
	addServeFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {key: {value, source}}")
	return cmd
}

// configEntry is one key of `hubproxy config --json`.
type configEntry struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

func printConfig(cmd *cobra.Command, l loaded, asJSON bool) error {
	v := reflect.ValueOf(l.cfg)
	keys := configKeys()
	if asJSON {
		out := make(map[string]configEntry, len(keys))
		for _, k := range keys {
			out[k.name] = configEntry{Value: render(k, v.FieldByIndex(k.field), true), Source: l.sources[k.name].String()}
		}
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tVALUE\tSOURCE")
	for _, k := range keys {
		val := render(k, v.FieldByIndex(k.field), true)
		if val == "" {
			val = `""`
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", k.name, val, l.sources[k.name])
	}
	return w.Flush()
}
