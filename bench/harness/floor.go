package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Floor is the net/http floor of scenarios 8 and 9: bench/floor's server,
// answering ranges of hubproxy's own warm blob with the headers hubproxy
// answered with and doing nothing else. hubproxy / Floor is the share of
// what a Go HTTP server can do on the machine that hubproxy reaches; Floor /
// nginx is what net/http itself costs against nginx.
const Floor = "net-http-floor"

// startFloor starts the floor on the large file's blob in hubproxy's warm
// cache, replaying the headers of hubproxy's answer to a range of n bytes.
// The caller stops it before hubproxy restarts, which removes that blob.
func (b *bench) startFloor(ctx context.Context, n int64) (*server, error) {
	f := b.fx.large
	hdr, err := rangeHeaders(ctx, fileURL(b.hp.baseURL(), f.repo, f.path), n)
	if err != nil {
		return nil, err
	}
	blob, err := blobPath(b.hp.cacheDir(), f.repo, hdr.Get("Etag"))
	if err != nil {
		return nil, err
	}
	s := &server{label: Floor, procs: b.procs, workDir: b.work, launch: func(dir string) (*proc, string, error) {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{"-listen", addr, "-file", blob}
		for k, vs := range hdr {
			for _, v := range vs {
				args = append(args, "-header", k+": "+v)
			}
		}
		p, err := b.procs.start(Floor, b.floorBin, args, childEnv(), dir+".log", syscall.SIGKILL)
		return p, "http://" + addr, err
	}}
	if err := s.restart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// blobPath is the blob hubproxy's cache holds for a model repo's file of
// that ETag, in huggingface_hub's layout.
func blobPath(cacheDir, repo, etag string) (string, error) {
	r, err := hub.ParseRepo(hub.Model, repo)
	if err != nil {
		return "", err
	}
	p := filepath.Join(cacheDir, r.CacheDir(), "blobs", hub.NormalizeETag(etag))
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("harness: hubproxy's blob of %s: %w (is its cache warm?)", repo, err)
	}
	return p, nil
}

// rangeHeaders are the headers of url's answer to its first n bytes, less
// those that depend on the range or the moment.
func rangeHeaders(ctx context.Context, url string, n int64) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", n-1))
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusPartialContent {
		return nil, fmt.Errorf("harness: %s answered a range with %s", url, resp.Status)
	}
	h := resp.Header.Clone()
	for _, k := range []string{"Date", "Content-Length", "Content-Range"} {
		h.Del(k)
	}
	return h, nil
}
