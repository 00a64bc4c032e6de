package main

import (
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
	return root
}
