package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Open reads back the one image of the layout in dir, the way a registry
// client or runtime would: through index.json, the manifest and the config.
func Open(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s: %d manifests in index.json, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// File is one regular file or directory of an image's filesystem.
type File struct {
	Header *tar.Header
	Data   []byte // nil for a directory
}

// Files flattens img's layers and returns every entry by absolute path.
func Files(img v1.Image) (map[string]File, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]File{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		f := File{Header: h}
		if h.Typeflag == tar.TypeReg {
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		out[path.Clean("/"+h.Name)] = f
	}
}
