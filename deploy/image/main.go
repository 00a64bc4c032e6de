// Command image builds hubproxy's container image as an OCI image layout,
// with no Docker daemon: the static binary on an empty base plus what the
// Dockerfile's distroless base provides. `make image` builds it (deploy/ is
// a module of its own) and runs it from the repository root, where the
// defaults point:
//
//	go -C deploy build -o ../bin/imagebuild ./image
//	bin/imagebuild -bin bin/hubproxy -out bin/image -tag dev
//
// Push or load the layout with any OCI tool, e.g.
// `skopeo copy oci:bin/image:dev docker://REGISTRY/hubproxy:dev`.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hubproxy/hubproxy/deploy/image/ociimage"
)

func main() {
	var opts ociimage.Options
	flag.StringVar(&opts.Binary, "bin", "bin/hubproxy", "static hubproxy binary (CGO_ENABLED=0)")
	flag.StringVar(&opts.CACerts, "ca-certs", ociimage.CACertsPath, "PEM CA bundle to install at "+ociimage.CACertsPath)
	flag.StringVar(&opts.Tag, "tag", "dev", "image name inside the layout (org.opencontainers.image.ref.name)")
	out := flag.String("out", "bin/image", "directory for the OCI image layout (an earlier layout there is replaced)")
	flag.Parse()
	created, err := sourceDateEpoch()
	if err != nil {
		fail(err)
	}
	opts.Created = created
	digest, err := ociimage.Build(opts, *out)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s: %s (%s)\n", *out, opts.Tag, digest)
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, or the Unix epoch: the image's
// timestamps are fixed so that one binary always gives one digest.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the epoch", s)
	}
	return time.Unix(n, 0), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}
