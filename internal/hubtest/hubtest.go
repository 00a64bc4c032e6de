// Package hubtest is a fake Hugging Face Hub for tests and benchmarks. It
// answers the way huggingface.co does (docs/hub-protocol.md), so hubproxy can be
// exercised against the real protocol's awkward parts without a network:
//
//   - three HTTP servers on 127.0.0.1, each on its own port: the hub (URL), a
//     CDN (CDNURL) that LFS files redirect to with presigned URLs, and a
//     "foreign" host (ForeignURL) that a fault can redirect to; so "another
//     host" is a real other origin, and credentials leaking to it are visible;
//   - LFS files answer /resolve/ with an absolute 302 to the CDN carrying the
//     metadata headers and Xet signals only there; regular files with a
//     relative 302 to /api/resolve-cache/…;
//   - the hub's error codes (RepoNotFound, RevisionNotFound, EntryNotFound,
//     GatedRepo) with the hub's statuses, for anonymous and token callers;
//   - the JSON API (repo info, paginated tree, paths-info in both body forms);
//   - ranges as the CDN serves them: one range as a 206, several (ascending,
//     apart) as a 206 multipart/byteranges, as CloudFront answers them, or,
//     with Options.SingleRanges, as a 200 of the whole file;
//   - counters of requests and body bytes, a request log, and injectable
//     faults (5xx, resets, truncation, ignored or wrong ranges, corruption,
//     stalls, foreign redirects), bandwidth caps and latency.
//
// The package does not import testing (NewT lives in testing.go, the only
// file that does), so benchmarks and commands can use New directly. Repository
// data is held in memory by reference: callers must not modify a File's Data
// after handing it in.
package hubtest

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Hub. The zero value is a hub that behaves like
// huggingface.co today.
type Options struct {
	// XetHeaders makes LFS resolve answers carry X-Xet-Hash, Link
	// rel="xet-auth" and X-Xet-Refresh-Route, and tree entries a xetHash, as
	// the real Hub does. nil means true, so a proxy is tested against them by
	// default; set it to new(false) to get a pre-Xet hub.
	XetHeaders *bool
	// PageSize is the number of tree entries per page (default 1000, as the
	// Hub pages).
	PageSize int
	// URLTTL is how long presigned CDN URLs stay valid (default 1h).
	URLTTL time.Duration
	// Latency is added before every request is handled, on every server.
	// It can be changed later with SetFaults.
	Latency time.Duration
	// BandwidthPerConn caps each connection's writes in bytes per second
	// (0 = unlimited). It can be changed later with SetFaults.
	BandwidthPerConn int64
	// CDNOnHub serves presigned blob URLs from the hub's own host (under
	// /cdn/), as self-hosted hubs and hubproxy tiers do, instead of the
	// separate CDN server. Requests there may carry the hub token.
	CDNOnHub bool
	// SingleRanges makes every route ignore a Range of several ranges and
	// answer 200 with the whole file, as a server may (RFC 9110 §14.2) and
	// as this fake did before it served multipart/byteranges; by default
	// ascending, non-overlapping sets get 206 multipart, as from CloudFront.
	SingleRanges bool
}

// Hub is a running fake hub. Create it with New (or NewT in tests) and stop it
// with Close. All methods are safe for concurrent use.
type Hub struct {
	// URL is the hub's base URL ("http://127.0.0.1:port"), the HF_ENDPOINT.
	URL string
	// CDNURL is the base URL of the CDN that LFS files redirect to.
	CDNURL string
	// ForeignURL is the base URL of a third host that the RedirectForeign
	// fault sends clients to; it serves file bytes by ETag and records
	// whether it was sent credentials.
	ForeignURL string

	// Immutable after New.
	xet      bool
	cdnOnHub bool
	oneRange bool // Options.SingleRanges
	pageSize int
	urlTTL   time.Duration
	servers  []*http.Server
	done     chan struct{} // closed by Close; ends stalls, latency and shaping waits
	wg       sync.WaitGroup

	closeOnce sync.Once

	// mu guards repos, blobs, revoked and seq. Objects reachable from a
	// commitObj are immutable once the commit is created, so they are used
	// after mu is released.
	mu      sync.RWMutex
	repos   map[repoKey]*repoState // see repoLocked
	blobs   map[string]*blob       // by sha256 (LFS) and by git oid
	revoked map[string]bool
	seq     int // commits made so far; dates commits deterministically

	signer    signer
	faults    faultState
	stats     stats
	latency   atomic.Int64 // time.Duration
	bandwidth atomic.Int64 // bytes per second per connection; 0 = unlimited
	reqID     atomic.Uint64
}

// Defaults for Options' zero values.
const (
	DefaultPageSize = 1000
	DefaultURLTTL   = time.Hour
)

// New starts a hub, its CDN and the foreign host on loopback ports.
func New(opts Options) (*Hub, error) {
	h := &Hub{
		xet:      opts.XetHeaders == nil || *opts.XetHeaders,
		cdnOnHub: opts.CDNOnHub,
		oneRange: opts.SingleRanges,
		pageSize: opts.PageSize,
		urlTTL:   opts.URLTTL,
		done:     make(chan struct{}),
		repos:    make(map[repoKey]*repoState),
		blobs:    make(map[string]*blob),
		revoked:  make(map[string]bool),
	}
	if h.pageSize <= 0 {
		h.pageSize = DefaultPageSize
	}
	if h.urlTTL <= 0 {
		h.urlTTL = DefaultURLTTL
	}
	h.signer.rotate()
	h.faults.counts = make(map[string]int64)
	h.stats.reset()
	h.latency.Store(int64(opts.Latency))
	h.bandwidth.Store(opts.BandwidthPerConn)

	handlers := []struct {
		url *string
		fn  http.HandlerFunc
	}{
		{&h.URL, h.serveHub},
		{&h.CDNURL, h.serveCDN},
		{&h.ForeignURL, h.serveForeign},
	}
	var listeners []net.Listener
	for _, s := range handlers {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, fmt.Errorf("hubtest: listen: %w", err)
		}
		listeners = append(listeners, l)
		*s.url = "http://" + l.Addr().String()
	}
	for i, s := range handlers {
		srv := &http.Server{
			Handler:           h.instrument(s.fn),
			ReadHeaderTimeout: 30 * time.Second,
			// Faults abort responses on purpose; their log lines are noise.
			ErrorLog: log.New(io.Discard, "", 0),
		}
		h.servers = append(h.servers, srv)
		l := &shapedListener{Listener: listeners[i], hub: h}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			// Serve returns ErrServerClosed on Close; it can fail otherwise
			// only if the listener breaks, which the next request reports.
			_ = srv.Serve(l)
		}()
	}
	return h, nil
}

// Close stops all three servers, closes their connections and ends any stalled
// response. It is safe to call more than once.
func (h *Hub) Close() {
	h.closeOnce.Do(func() {
		close(h.done)
		for _, s := range h.servers {
			s.Close()
		}
		h.wg.Wait()
	})
}

// pause waits for d, or until ctx ends or the hub closes; it reports whether
// the full wait elapsed.
func (h *Hub) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-h.done:
		return false
	}
}

// instrument counts and logs every request and applies the configured latency.
func (h *Hub) instrument(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.stats.requests.Add(1)
		rec := &recorder{ResponseWriter: w}
		if h.pause(r.Context(), time.Duration(h.latency.Load())) {
			next(rec, r)
		}
		h.stats.log(RequestRecord{
			Method:  r.Method,
			Host:    r.Host,
			Path:    r.URL.EscapedPath(),
			Query:   r.URL.RawQuery,
			Range:   r.Header.Get("Range"),
			Accept:  r.Header.Get("Accept"),
			HadAuth: r.Header.Get("Authorization") != "",
			Status:  rec.status,
			Bytes:   rec.bytes,
		})
	})
}

// recorder remembers the status a handler sent. Unwrap lets
// http.ResponseController reach the real writer for Flush and Hijack.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64 // body bytes the writer accepted
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
