package chartcheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hubproxy/hubproxy/deploy/image/ociimage"
)

// repoRoot is the repository root, the hubproxy module that deploy/go.mod's
// replace directive points at, relative to this package's directory.
const repoRoot = "../../.."

// builtImage is hubproxy's image as `make image` builds it, read back from
// its OCI layout.
type builtImage struct {
	config v1.Config
	files  map[string]ociimage.File
}

// buildImage builds the static binary (CGO_ENABLED=0, as the Dockerfile and
// `make build` do), builds the image from it with deploy/image's builder and
// reads the layout back. The binary in the image must be the one built, byte
// for byte: the boot test runs what the image holds.
func buildImage(t *testing.T) builtImage {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "hubproxy")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/hubproxy")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/hubproxy: %v\n%s", err, out)
	}
	layout := filepath.Join(dir, "image")
	if _, err := ociimage.Build(ociimage.Options{Binary: bin, CACerts: ociimage.CACertsPath, Tag: "boot-test"}, layout); err != nil {
		t.Fatal(err)
	}
	img, err := ociimage.Open(layout)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	files, err := ociimage.Files(img)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Config.Entrypoint) == 0 {
		t.Fatal("the image has no ENTRYPOINT")
	}
	if got := files[cf.Config.Entrypoint[0]].Data; !bytes.Equal(got, want) {
		t.Fatalf("the image's %s (%d bytes) is not the binary built (%d bytes)", cf.Config.Entrypoint[0], len(got), len(want))
	}
	return builtImage{config: cf.Config, files: files}
}
