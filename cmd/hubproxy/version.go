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

// readBuildInfo is this binary's buildInfo: the -X stamps over what the Go
// toolchain recorded (runtime/debug.ReadBuildInfo).
func readBuildInfo(stampVersion, stampCommit string) buildInfo {
	info, _ := debug.ReadBuildInfo()
	return buildInfoFrom(stampVersion, stampCommit, info)
}

// develVersion is the toolchain's version for a main module built from a
// working tree it could not (or did not) name a version for.
const develVersion = "(devel)"

// buildInfoFrom combines the -X stamps with info (nil: none recorded), so
// that a build the Makefile did not stamp (go build, go install) still
// names itself: the module version (go install module@version, or the
// pseudo-version go build derives from git since Go 1.24, +dirty for a
// modified tree) and the VCS settings (vcs.revision, vcs.time,
// vcs.modified). A stamp wins over each; an empty stamp (-X main.version=
// from a Makefile run outside git) is no stamp. `go run` records no VCS
// settings at all (cmd/go stamps only go build and go install), so its
// binary is "(devel)" without a commit, and says only that.
func buildInfoFrom(stampVersion, stampCommit string, info *debug.BuildInfo) buildInfo {
	bi := buildInfo{Version: develVersion, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	var revision string
	if info != nil {
		if v := info.Main.Version; v != "" && v != develVersion {
			bi.Version = v
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
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
	bi.Commit = revision
	if stampVersion != "" {
		bi.Version = stampVersion
	}
	if stampCommit != "" && stampCommit != revision {
		// A commit the toolchain did not see: whether its tree was
		// modified is unknown, and so is its time.
		bi.Commit, bi.Modified, bi.Time = stampCommit, false, ""
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
