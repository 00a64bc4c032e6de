package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// newClient is the benchmark's HTTP client: no environment proxy, no
// compression, enough idle connections for every concurrent worker. It
// follows redirects, as hub clients do, forwarding Range to the CDN.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DisableCompression:  true,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		ReadBufferSize:      256 << 10,
	}}
}

// StatusError is a response the benchmark did not expect.
type StatusError struct {
	URL    string
	Status int
	Want   int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: status %d, want %d: %s", e.URL, e.Status, e.Want, e.Body)
}

// ErrShort is wrapped when a body's length or content is not what the file
// holds.
var ErrShort = errors.New("harness: wrong body")

// get issues GET u (with Range rng unless empty) and checks the status.
func get(ctx context.Context, c *http.Client, u, rng string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	want := http.StatusOK
	if rng != "" {
		req.Header.Set("Range", rng)
		want = http.StatusPartialContent
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &StatusError{URL: u, Status: resp.StatusCode, Want: want, Body: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// download reads all of u and checks its length, and its sha256 when want
// is non-zero.
func download(ctx context.Context, c *http.Client, u string, size int64, want [32]byte) error {
	resp, err := get(ctx, c, u, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var w io.Writer = sink()
	var h hash.Hash
	if want != ([32]byte{}) {
		h = sha256.New()
		w = h
	}
	n, err := io.CopyBuffer(w, resp.Body, make([]byte, 1<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if n != size {
		return fmt.Errorf("%w: GET %s: %d bytes, want %d", ErrShort, u, n, size)
	}
	if h != nil && !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("%w: GET %s: sha256 mismatch", ErrShort, u)
	}
	return nil
}

// sink discards what is written to it. It hides io.Discard's ReadFrom,
// which would read through its own 8 KiB buffers and make the client, not
// the server, the bottleneck of a multi-GB download.
func sink() io.Writer { return struct{ io.Writer }{io.Discard} }

// readRange reads bytes [off, off+n) of u into a new slice.
func readRange(ctx context.Context, c *http.Client, u string, off, n int64) ([]byte, error) {
	resp, err := get(ctx, c, u, fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, fmt.Errorf("%w: GET %s range %d+%d: %v", ErrShort, u, off, n, err)
	}
	return b, nil
}

// discardRange reads bytes [off, off+n) of u through buf (nil: a new one)
// and throws them away.
func discardRange(ctx context.Context, c *http.Client, u string, off, n int64, buf []byte) error {
	resp, err := get(ctx, c, u, fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if buf == nil {
		buf = make([]byte, 1<<20)
	}
	got, err := io.CopyBuffer(sink(), resp.Body, buf)
	if err == nil && got != n {
		err = fmt.Errorf("%w: %d bytes, want %d", ErrShort, got, n)
	}
	if err != nil {
		return fmt.Errorf("GET %s range %d+%d: %w", u, off, n, err)
	}
	return nil
}

// tensorSpan is where one tensor's bytes lie in its file.
type tensorSpan struct{ off, n int64 }

// readHeader is what a client without a tensor API does: read the 8-byte
// header length, then the JSON header, in two range requests (as
// safetensors' metadata_parsing documents). It returns every tensor's
// absolute span.
func readHeader(ctx context.Context, c *http.Client, u string) (map[string]tensorSpan, error) {
	pre, err := readRange(ctx, c, u, 0, 8)
	if err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint64(pre))
	if n <= 0 || n > 100<<20 {
		return nil, fmt.Errorf("%w: %s: header length %d", ErrShort, u, n)
	}
	js, err := readRange(ctx, c, u, 8, n)
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: header: %v", ErrShort, u, err)
	}
	out := make(map[string]tensorSpan, len(raw))
	for name, v := range raw {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("%w: %s: tensor %q: %v", ErrShort, u, name, err)
		}
		out[name] = tensorSpan{off: 8 + n + t.DataOffsets[0], n: t.DataOffsets[1] - t.DataOffsets[0]}
	}
	return out, nil
}

// tensorByHeader fetches one tensor the client way: header, then its range.
func tensorByHeader(ctx context.Context, c *http.Client, u, name string) error {
	spans, err := readHeader(ctx, c, u)
	if err != nil {
		return err
	}
	s, ok := spans[name]
	if !ok {
		return fmt.Errorf("%w: %s has no tensor %q", ErrShort, u, name)
	}
	return discardRange(ctx, c, u, s.off, s.n, nil)
}

// tensorByAPI fetches one tensor from hubproxy's tensor API.
func tensorByAPI(ctx context.Context, c *http.Client, base, repo, name string, want int64) error {
	u := base + "/models/" + repo + "/tensors/" + url.PathEscape(name)
	resp, err := get(ctx, c, u, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.CopyBuffer(sink(), resp.Body, make([]byte, 1<<20))
	if err == nil && n != want {
		err = fmt.Errorf("%w: %d bytes, want %d", ErrShort, n, want)
	}
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// listingByAPI lists a repo's tensors through hubproxy's tensor API and
// returns how many it names.
func listingByAPI(ctx context.Context, c *http.Client, base, repo string) (int, error) {
	u := base + "/models/" + repo + "/tensors"
	resp, err := get(ctx, c, u, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var l struct {
		Tensors []json.RawMessage `json:"tensors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	return len(l.Tensors), nil
}

// listingByHeaders lists a sharded repo the client way: the index, then
// every shard's header, shards concurrently (up to 8 at once, as hub
// clients parallelise downloads). It returns how many tensors it found.
func listingByHeaders(ctx context.Context, c *http.Client, base, repo string) (int, error) {
	resp, err := get(ctx, c, fileURL(base, repo, indexFile), "")
	if err != nil {
		return 0, err
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ix)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("%w: index: %v", ErrShort, err)
	}
	seen := map[string]bool{}
	var shards []string
	for _, s := range ix.WeightMap {
		if !seen[s] {
			seen[s] = true
			shards = append(shards, s)
		}
	}
	var (
		mu    sync.Mutex
		total int
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 8)
	)
	for _, s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			spans, err := readHeader(ctx, c, fileURL(base, repo, s))
			mu.Lock()
			defer mu.Unlock()
			total += len(spans)
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	return total, first
}
