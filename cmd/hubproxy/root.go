package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "hubproxy",
		Short: "A caching, range-aware proxy for the Hugging Face Hub",
		Long: `hubproxy sits between hub clients and the Hugging Face Hub. Point clients at it
(HF_ENDPOINT=http://hubproxy:8080) and files are cached on local disk in the
huggingface_hub layout, fetched lazily by byte range.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Setting Version makes cobra add --version (and -v).
		Version: versionText(readBuildInfo(version, buildCommit)),
	}
	// The whole text, not cobra's "hubproxy version X": --version and the
	// version command must agree, as scripts and bug reports use either.
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newServeCmd(), newConfigCmd(), newLsCmd(), newPullCmd(), newCacheCmd(), newVersionCmd(), newDemoCmd(), newGPUCmd())
	// Cobra adds its completion group only when it executes; add it now so
	// that it is held to the same rule as ours.
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every group (the root, cache, cache
// store, gpu, …) answer an unknown subcommand with an error, so a non-zero
// exit, and suggestions. Cobra checks that only at the root; a group
// below it without a Run of its own prints its help for anything and
// exits 0, so a script calling a subcommand this build lacks would go on
// as if it had run. The root gets the same treatment so that every level
// words it alike. A group named alone still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommandError(cmd, args[0])
	}
}

// unknownCommandError says which command is unknown where, and what was
// probably meant (cobra's suggestions: a close spelling or a prefix).
func unknownCommandError(cmd *cobra.Command, name string) error {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%s (see %q)", msg, cmd.CommandPath()+" --help")
}
