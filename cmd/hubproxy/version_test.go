package main

import (
	"runtime/debug"
	"testing"
)

func TestBuildInfoFallsBackToVCS(t *testing.T) {
	vcs := func(version, rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: version}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: modified},
		}}
	}
	for name, tc := range map[string]struct {
		stampVersion, stampCommit string
		info                      *debug.BuildInfo
		want                      buildInfo
	}{
		"go build, clean tree": {"", "", vcs("v0.0.0-20261201100000-abc123def456", "abc123def456", "false"),
			buildInfo{Version: "v0.0.0-20261201100000-abc123def456", Commit: "abc123def456", Time: "2026-12-01T10:00:00Z"}},
		"go build, modified tree": {"", "", vcs("v0.0.0-20261201100000-abc123def456+dirty", "abc123def456", "true"),
			buildInfo{Version: "v0.0.0-20261201100000-abc123def456+dirty", Commit: "abc123def456", Time: "2026-12-01T10:00:00Z", Modified: true}},
		"no version derived, commit known": {"", "", vcs("(devel)", "abc123", "true"),
			buildInfo{Version: "(devel)", Commit: "abc123", Time: "2026-12-01T10:00:00Z", Modified: true}},
		"go run: nothing recorded": {"", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}},
			buildInfo{Version: "(devel)"}},
		"no build info": {"", "", nil, buildInfo{Version: "(devel)"}},
		"make build, modified tree": {"v1.2.0-dirty", "abc123", vcs("(devel)", "abc123", "true"),
			buildInfo{Version: "v1.2.0-dirty", Commit: "abc123", Time: "2026-12-01T10:00:00Z", Modified: true}},
		"stamped commit the toolchain did not see": {"v1.2.0", "fff999", vcs("(devel)", "abc123", "true"),
			buildInfo{Version: "v1.2.0", Commit: "fff999"}},
		"empty stamps are none": {"", "", vcs("v1.0.0", "abc123", "false"),
			buildInfo{Version: "v1.0.0", Commit: "abc123", Time: "2026-12-01T10:00:00Z"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := buildInfoFrom(tc.stampVersion, tc.stampCommit, tc.info)
			got.GoVersion, got.Platform = "", "" // the toolchain's, not under test
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
