package ociimage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what goes into the image.
type Options struct {
	// Binary is the static hubproxy executable (CGO_ENABLED=0).
	Binary string
	// CACerts is the PEM bundle installed at CACertsPath; distroless takes
	// Debian's, so the build host's is the same kind of file.
	CACerts string
	// Tag names the image in the layout (org.opencontainers.image.ref.name),
	// e.g. for `skopeo copy oci:DIR:TAG ...`.
	Tag string
	// Created is the image's creation time and every file's mtime; a fixed
	// value (SOURCE_DATE_EPOCH) makes the build reproducible.
	Created time.Time
}

// refNameAnnotation names an image inside an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// errNotLayout: Build replaces an earlier layout but nothing else.
var errNotLayout = errors.New("exists and is neither empty nor an OCI image layout; refusing to replace it")

// Build writes the image as an OCI image layout in dir (replacing a layout
// already there) and returns the image's manifest digest.
func Build(opts Options, dir string) (v1.Hash, error) {
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return v1.Hash{}, err
	}
	arch, err := inspectBinary(bin)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%s: %w", opts.Binary, err)
	}
	certs, err := os.ReadFile(opts.CACerts)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("CA certificates: %w", err)
	}
	if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		return v1.Hash{}, fmt.Errorf("CA certificates: %s holds no PEM certificate", opts.CACerts)
	}
	img, err := image(bin, certs, arch, opts)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := clearLayout(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img,
		layout.WithAnnotations(map[string]string{refNameAnnotation: opts.Tag}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}),
	); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// image assembles the one-layer image and its configuration.
func image(bin, certs []byte, arch string, opts Options) (v1.Image, error) {
	created := opts.Created.UTC()
	layerTar, err := writeTar(rootfs(bin, certs), created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: created},
		CreatedBy: "deploy/image: the static hubproxy binary and distroless/static's files",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: created}
	cf.Config = v1.Config{
		Entrypoint:   Entrypoint,
		Cmd:          Cmd,
		User:         User,
		WorkingDir:   WorkingDir,
		Env:          Env(),
		ExposedPorts: map[string]struct{}{ExposedPort: {}},
		Labels:       map[string]string{"org.opencontainers.image.version": opts.Tag},
	}
	return mutate.ConfigFile(img, cf)
}

// clearLayout makes dir an empty directory, removing an earlier layout but
// never anything else: a mistyped -out must not delete a user's files.
func clearLayout(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(ents) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("%s %w", dir, errNotLayout)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}
