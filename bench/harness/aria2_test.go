package harness

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

func TestAria2Args(t *testing.T) {
	args := aria2Args("http://cdn/blobs/x?sig=1", "/d", "out", 16, 8*MiB)
	for _, want := range []string{
		"--max-connection-per-server=16", "--split=16", "--min-split-size=8388608",
		"--file-allocation=none", "--dir=/d", "--out=out", "--summary-interval=0",
		"--show-console-readout=false", "--no-conf=true",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %q: %v", want, args)
		}
	}
	if args[len(args)-1] != "http://cdn/blobs/x?sig=1" {
		t.Errorf("the URL is not the last argument: %v", args)
	}
}

// TestAria2Fetch resolves a file at the fake hub and downloads it from the
// CDN with aria2c, when aria2c is installed.
func TestAria2Fetch(t *testing.T) {
	bin, err := exec.LookPath("aria2c")
	if err != nil {
		t.Skip("aria2c is not installed (apt-get install aria2); TestQuickBenchmark installs it when root")
	}
	h := hubtest.NewT(t, hubtest.Options{})
	cfg := Quick()
	cfg.LargeSize, cfg.TensorSize, cfg.Verify = 4*MiB, 1*MiB, true
	fx := addFixtures(h, cfg)
	u := fileURL(h.URL, fx.large.repo, fx.large.path)

	cdn, err := resolveCDN(context.Background(), u)
	if err != nil || !strings.HasPrefix(cdn, h.CDNURL+"/blobs/") {
		t.Fatalf("resolveCDN = %q, %v; want a URL on the CDN %s", cdn, err, h.CDNURL)
	}
	g := newProcs()
	t.Cleanup(g.stopAll)
	a := &aria2{bin: bin, procs: g, workDir: t.TempDir(), hubURL: h.URL, conns: 4, split: MiB}
	path, err := a.fetch(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFile(path, fx.large.size, fx.large.sha256); err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) == a.workDir || a.cpu <= 0 {
		t.Errorf("path %s, CPU %v", path, a.cpu)
	}
	if c := h.Counters(); c.CDNRequests < 2 {
		t.Errorf("%d CDN requests: aria2c did not split the download", c.CDNRequests)
	}
	fx.large.sha256[0] ^= 1
	if err := checkFile(path, fx.large.size, fx.large.sha256); err == nil {
		t.Error("checkFile accepted a wrong sha256")
	}
}
