package ociimage

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// staticBinary builds a tiny program with CGO_ENABLED=0: a real static ELF,
// quick to build, standing in for hubproxy (the chart's boot test runs the
// real one out of a built image).
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hi\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hubproxy")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// testCerts is a PEM file with one (syntactically) PEM certificate block.
func testCerts(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildTestImage builds an image from staticBinary and reads it back from
// its layout; it returns the image and the binary's bytes.
func buildTestImage(t *testing.T) (v1.Image, []byte) {
	t.Helper()
	bin := staticBinary(t)
	dir := t.TempDir()
	if _, err := Build(Options{Binary: bin, CACerts: testCerts(t), Tag: "test"}, dir); err != nil {
		t.Fatal(err)
	}
	img, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return img, b
}

// TestBuildWritesAnOCILayout reads the layout back with go-containerregistry,
// as a registry client would, and checks the filesystem the container gets.
func TestBuildWritesAnOCILayout(t *testing.T) {
	bin, certs := staticBinary(t), testCerts(t)
	dir := t.TempDir()
	digest, err := Build(Options{Binary: bin, CACerts: certs, Tag: "v9"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest || im.Manifests[0].Annotations[refNameAnnotation] != "v9" {
		t.Fatalf("index.json = %+v, want one manifest %s named v9", im.Manifests, digest)
	}
	if pl := im.Manifests[0].Platform; pl == nil || pl.OS != "linux" || pl.Architecture != runtime.GOARCH {
		t.Errorf("index platform = %+v, want linux/%s (read off the binary)", pl, runtime.GOARCH)
	}
	img, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	// Every blob the manifest names is in the layout and hashes to its name.
	if err := validateBlobs(img); err != nil {
		t.Error(err)
	}

	files, err := Files(img)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(bin)
	if f := files[BinaryPath]; !bytes.Equal(f.Data, want) || f.Header.Mode&0o111 == 0 {
		t.Errorf("%s in the image: %d bytes mode %o; want the %d bytes built, executable", BinaryPath, len(f.Data), f.Header.Mode, len(want))
	}
	wantCerts, _ := os.ReadFile(certs)
	if f := files[CACertsPath]; !bytes.Equal(f.Data, wantCerts) {
		t.Errorf("%s is not the CA bundle given", CACertsPath)
	}
	for _, d := range append(OwnedDirs, WorkingDir) {
		if f, ok := files[d]; !ok || f.Header.Uid != NonrootUID || f.Header.Gid != NonrootUID || f.Header.Mode&0o200 == 0 {
			t.Errorf("%s: %+v, want a directory nonroot (%d) can write", d, f.Header, NonrootUID)
		}
	}
	if f := files["/tmp"]; f.Header == nil || f.Header.Mode != 0o1777 {
		t.Errorf("/tmp = %+v, want mode 1777", f.Header)
	}
	if f := files["/etc/passwd"]; !strings.Contains(string(f.Data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the nonroot user:\n%s", f.Data)
	}
}

// validateBlobs recomputes each blob's digest from the bytes in the layout.
func validateBlobs(img v1.Image) error {
	var errs []error
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		h, _, err := v1.SHA256(rc)
		rc.Close()
		if want, _ := l.Digest(); err != nil || h != want {
			errs = append(errs, errors.New("layer blob does not hash to its digest "+want.String()))
		}
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	h, _, _ := v1.SHA256(bytes.NewReader(raw))
	if want, _ := img.ConfigName(); h != want {
		errs = append(errs, errors.New("config blob does not hash to its digest"))
	}
	return errors.Join(errs...)
}

// TestBuildIsReproducible: the same binary gives the same digest, and a
// rebuild replaces the earlier layout instead of adding to it.
func TestBuildIsReproducible(t *testing.T) {
	opts := Options{Binary: staticBinary(t), CACerts: testCerts(t), Tag: "x", Created: time.Unix(1700000000, 0)}
	dir := t.TempDir()
	first, err := Build(opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("digests %s and %s from the same inputs", first, second)
	}
	if _, err := Open(dir); err != nil {
		t.Errorf("rebuilt layout: %v", err)
	}
}

// TestBuildRefuses covers the inputs that would make an image that cannot
// start, and an -out that is not ours to replace.
func TestBuildRefuses(t *testing.T) {
	bin, certs := staticBinary(t), testCerts(t)
	t.Run("dynamic binary", func(t *testing.T) {
		dyn := "/bin/sh"
		if f, err := elf.Open(dyn); err != nil || !hasInterp(f) {
			t.Skipf("%s is not a dynamically linked ELF here", dyn)
		}
		_, err := Build(Options{Binary: dyn, CACerts: certs}, t.TempDir())
		if !errors.Is(err, errNotStatic) {
			t.Errorf("error = %v, want errNotStatic", err)
		}
	})
	t.Run("not an executable", func(t *testing.T) {
		if _, err := Build(Options{Binary: certs, CACerts: certs}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "ELF") {
			t.Errorf("error = %v, want one about ELF", err)
		}
	})
	t.Run("no certificates", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "empty.crt")
		os.WriteFile(empty, nil, 0o644)
		if _, err := Build(Options{Binary: bin, CACerts: empty}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "PEM") {
			t.Errorf("error = %v, want one about PEM", err)
		}
	})
	t.Run("a directory that is not a layout", func(t *testing.T) {
		dir := t.TempDir()
		keep := filepath.Join(dir, "precious.txt")
		os.WriteFile(keep, []byte("x"), 0o644)
		if _, err := Build(Options{Binary: bin, CACerts: certs}, dir); !errors.Is(err, errNotLayout) {
			t.Errorf("error = %v, want errNotLayout", err)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("the user's file is gone: %v", err)
		}
	})
}

func hasInterp(f *elf.File) bool {
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}
