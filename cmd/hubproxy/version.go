package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version and buildCommit may be stamped at link time, which takes precedence
// over what the Go toolchain recorded:
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.buildCommit=$(git rev-parse HEAD)" ./cmd/hubproxy
//
// They are package variables only because -X can set nothing else.
var (
	version     string
	buildCommit string
)

// buildInfo is what `hubproxy version` prints.
type buildInfo struct {
	Version   string
	Commit    string
	Time      string // commit time, from VCS stamping
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string
	Platform  string
}

// readBuildInfo combines the -X stamps with runtime/debug.ReadBuildInfo:
// the module version (set by go install module@version) and the VCS
// settings go build records in a git checkout.
func readBuildInfo(stampVersion, stampCommit string) buildInfo {
	bi := buildInfo{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		if v := info.Main.Version; v != "" {
			bi.Version = v
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				bi.Commit = s.Value
			case "vcs.time":
				bi.Time = s.Value
			case "vcs.modified":
				bi.Modified = s.Value == "true"
			}
		}
		if info.GoVersion != "" {
			bi.GoVersion = info.GoVersion
		}
	}
	if stampVersion != "" {
		bi.Version = stampVersion
	}
	if stampCommit != "" {
		bi.Commit, bi.Modified = stampCommit, false
	}
	return bi
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), versionText(readBuildInfo(version, buildCommit)))
			return err
		},
	}
}

// versionText is what both `hubproxy version` and `hubproxy --version` print.
func versionText(bi buildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hubproxy %s\n", bi.Version)
	if bi.Commit != "" {
		c := bi.Commit
		if bi.Modified {
			c += " (modified)"
		}
		fmt.Fprintf(&b, "commit:  %s\n", c)
	}
	if bi.Time != "" {
		fmt.Fprintf(&b, "date:    %s\n", bi.Time)
	}
	fmt.Fprintf(&b, "go:      %s %s\n", bi.GoVersion, bi.Platform)
	return b.String()
}
