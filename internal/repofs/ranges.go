package repofs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
)

// How ReadRanges turns many small ranges into few requests.
const (
	// freeGap: gaps up to this are always fetched, joining their
	// neighbours: a separate part costs about as much (some 100 bytes of
	// boundary and part headers, and its entry in the Range header).
	freeGap = 128
	// maxGap: no gap longer than this is fetched; past a few KiB another
	// part is cheaper than the gap's bytes.
	maxGap = 4 << 10
	// gapShare: the gaps fetched between freeGap and maxGap add at most
	// 1/gapShare to the bytes asked, smallest first, so coalescing keeps a
	// sparse read well inside 1.5x its size.
	gapShare = 4
	// requestBytes bounds one request's ranges, so a large sparse read
	// still spreads over parallel requests.
	requestBytes = 8 << 20
	// multiRequests and singleRequests bound the requests one ReadRanges
	// call has in flight: multipart ones carry up to fetch.MaxRanges ranges
	// each; single ones (an upstream that refuses multipart) carry one
	// small range, so more of them run at once to keep the line busy.
	multiRequests  = 8
	singleRequests = 16
	// refusalMemory is how long a host that refused a multi-range request
	// gets single ranges only before it is asked again: its refusal cost
	// the bytes the transport took in before the answer was closed.
	refusalMemory = 10 * time.Minute
)

// ReadRanges reads len(bufs[i]) bytes at offs[i] into bufs[i], for every i:
// a vectored ReadAt for reads too sparse for the cache, whose whole-block
// fills would fetch many times the bytes asked (a column shard of a
// row-major tensor: a short piece of every row). What the cache holds is
// read from it; the rest comes straight from upstream, uncached, since a
// piece of a block cannot be recorded in the cache. Ranges with small gaps
// are fetched as one; the rest go as multipart/byteranges requests of up to
// fetch.MaxRanges ranges, several in parallel, or as parallel single-range
// requests when the upstream does not answer multi-range requests with
// multipart (then remembered per download host for a while, since each
// refusal costs what the transport had taken in of the whole-file answer).
// Every upstream byte is checked as fetch checks a fill's (each part is
// exactly the range asked, of the resolved file), and an expired download
// URL is resolved again, at the commit, once. Ranges may come in any order
// and may overlap. On error the contents of bufs are undefined.
func (f *File) ReadRanges(bufs [][]byte, offs []int64) error {
	if len(bufs) != len(offs) {
		return fmt.Errorf("repofs: ReadRanges: %d buffers for %d offsets", len(bufs), len(offs))
	}
	var missing []asked
	for i, b := range bufs {
		off, n := offs[i], int64(len(b))
		switch {
		case n == 0:
		case off < 0 || off > f.Meta.Size-n:
			return fmt.Errorf("repofs: ReadRanges: bytes %d+%d are outside %s (%d bytes)", off, n, f.Path, f.Meta.Size)
		case !f.bypassing.Load() && f.Present(off, off+n) == n:
			// Cached: a warm read never goes upstream.
			if _, err := f.ReadAt(b, off); err != nil {
				return err
			}
		default:
			missing = append(missing, asked{off: off, buf: b})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return f.fetchSpans(coalesce(missing))
}

// asked is one range ReadRanges was asked for: where its bytes go.
type asked struct {
	off int64
	buf []byte
}

// span is a stretch of the file fetched as one range: asked ranges and the
// gaps fetched between them.
type span struct {
	off, end int64
	members  []asked
}

// buffer is where the span's bytes are read to: the one asked range's own
// buffer when the span is just that, else a buffer to scatter from.
func (s *span) buffer() []byte {
	if m := s.members; len(m) == 1 && m[0].off == s.off && int64(len(m[0].buf)) == s.end-s.off {
		return m[0].buf
	}
	return make([]byte, s.end-s.off)
}

// scatter copies the span's bytes b to the asked ranges it holds (none
// when b is the one range's own buffer).
func (s *span) scatter(b []byte) {
	for _, m := range s.members {
		if rel := m.off - s.off; &b[rel] != &m.buf[0] {
			copy(m.buf, b[rel:])
		}
	}
}

// coalesce sorts ws into spans: overlapping and nearly adjacent ranges
// always join (freeGap); then the smallest gaps up to maxGap, while the
// bytes they add stay within 1/gapShare of those asked.
func coalesce(ws []asked) []span {
	slices.SortFunc(ws, func(a, b asked) int { return cmp.Compare(a.off, b.off) })
	var spans []span
	var total int64
	for _, w := range ws {
		end := w.off + int64(len(w.buf))
		total += int64(len(w.buf))
		if n := len(spans); n > 0 && w.off-spans[n-1].end <= freeGap {
			spans[n-1].end = max(spans[n-1].end, end)
			spans[n-1].members = append(spans[n-1].members, w)
			continue
		}
		spans = append(spans, span{off: w.off, end: end, members: []asked{w}})
	}
	var gaps []int // i: the gap after spans[i]
	for i := range len(spans) - 1 {
		if spans[i+1].off-spans[i].end <= maxGap {
			gaps = append(gaps, i)
		}
	}
	gapOf := func(i int) int64 { return spans[i+1].off - spans[i].end }
	slices.SortStableFunc(gaps, func(a, b int) int { return cmp.Compare(gapOf(a), gapOf(b)) })
	bridge := make([]bool, len(spans))
	budget := total / gapShare
	for _, i := range gaps {
		if gapOf(i) > budget {
			break
		}
		budget -= gapOf(i)
		bridge[i] = true
	}
	out := spans[:0]
	for i, s := range spans {
		if n := len(out); n > 0 && bridge[i-1] {
			out[n-1].end = s.end
			out[n-1].members = append(out[n-1].members, s.members...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// group splits spans, in order, into requests of at most fetch.MaxRanges
// ranges and about requestBytes bytes.
func group(spans []span) [][]span {
	var out [][]span
	var bytes int64
	for i := range spans {
		n := len(out)
		size := spans[i].end - spans[i].off
		if n == 0 || len(out[n-1]) == fetch.MaxRanges || bytes+size > requestBytes {
			out = append(out, nil)
			n, bytes = n+1, 0
		}
		out[n-1] = append(out[n-1], spans[i])
		bytes += size
	}
	return out
}

// fetchSpans fetches spans from upstream. While it is not known whether
// the download host answers multi-range requests with multipart, one
// request asks it first, alone, so a refusal costs one answer, not one per
// request in flight.
func (f *File) fetchSpans(spans []span) error {
	ctx, cancel := context.WithCancelCause(f.ctx)
	defer cancel(nil)
	host, err := f.origin.host(ctx)
	if err != nil {
		return err
	}
	groups := group(spans)
	v := f.multipartVerdict(host)
	if v == verdictUnknown {
		if i := slices.IndexFunc(groups, func(g []span) bool { return len(g) > 1 }); i >= 0 {
			served, err := f.tryMultipart(ctx, host, groups[i])
			if err != nil {
				return err
			}
			if served {
				groups = slices.Delete(groups, i, i+1)
			}
			v = f.multipartVerdict(host)
		}
	}
	var jobs []func(context.Context) error
	parallel := multiRequests
	if v == verdictRefused {
		parallel = singleRequests
		for _, g := range groups {
			for i := range g {
				jobs = append(jobs, func(ctx context.Context) error { return f.fetchSingle(ctx, &g[i]) })
			}
		}
	} else {
		for _, g := range groups {
			jobs = append(jobs, func(ctx context.Context) error { return f.fetchGroup(ctx, host, g) })
		}
	}
	return runJobs(ctx, cancel, jobs, parallel)
}

// runJobs runs jobs, parallel at a time, until all are done or one fails:
// then the others are cancelled and its error returned.
func runJobs(ctx context.Context, cancel context.CancelCauseFunc, jobs []func(context.Context) error, parallel int) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		next  int
		first error
	)
	for range min(parallel, len(jobs)) {
		wg.Go(func() {
			for {
				mu.Lock()
				if first != nil || next == len(jobs) {
					mu.Unlock()
					return
				}
				job := jobs[next]
				next++
				mu.Unlock()
				if err := job(ctx); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel(err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// fetchGroup fetches spans in one multipart request, or one by one when
// there is one, or the upstream cannot or will not.
func (f *File) fetchGroup(ctx context.Context, host string, spans []span) error {
	if len(spans) > 1 {
		served, err := f.tryMultipart(ctx, host, spans)
		if served || err != nil {
			return err
		}
	}
	return f.fetchEach(ctx, spans)
}

// tryMultipart fetches spans in one multi-range request, unless the
// upstream cannot (served false, nil) or refuses, which is remembered for
// the host. The refused answer is closed unread.
func (f *File) tryMultipart(ctx context.Context, host string, spans []span) (served bool, err error) {
	if f.multipartVerdict(host) == verdictRefused {
		return false, nil
	}
	ranges := make([]fetch.Range, len(spans))
	for i, s := range spans {
		ranges[i] = fetch.Range{Off: s.off, Len: s.end - s.off}
	}
	body, err := f.origin.fetchRanges(ctx, ranges)
	if errors.Is(err, fetch.ErrNotMultipart) {
		f.fs.log.Debug("upstream refused a multi-range request; fetching single ranges", "repo", f.Repo.String(), "path", f.Path, "host", host, "err", err)
		f.noteMultipart(host, false)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer body.Close()
	f.noteMultipart(host, true)
	for i := range spans {
		if err := f.readSpan(ctx, body, &spans[i]); err != nil {
			return false, err
		}
	}
	return true, nil
}

// fetchEach fetches spans one request each, in turn.
func (f *File) fetchEach(ctx context.Context, spans []span) error {
	for i := range spans {
		if err := f.fetchSingle(ctx, &spans[i]); err != nil {
			return err
		}
	}
	return nil
}

// fetchSingle fetches one span with a single-range request.
func (f *File) fetchSingle(ctx context.Context, s *span) error {
	body, err := f.origin.FetchRange(ctx, s.off, s.end-s.off)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := f.readSpan(ctx, body, s); err != nil {
		return err
	}
	// The body must end with the span: fetch's range body fails a longer one.
	if _, err := body.Read(make([]byte, 1)); err != io.EOF {
		if err == nil {
			err = fetch.ErrLongBody
		}
		return fmt.Errorf("repofs: bytes %d-%d of %s: %w", s.off, s.end-1, f.Path, err)
	}
	return nil
}

// readSpan reads s's bytes from body, counting them in the request's tally,
// and hands them to the asked ranges.
func (f *File) readSpan(ctx context.Context, body io.Reader, s *span) error {
	b := s.buffer()
	n, err := io.ReadFull(body, b)
	cache.TallyFrom(ctx).Add(int64(n))
	if err != nil {
		return fmt.Errorf("repofs: reading bytes %d-%d of %s: %w", s.off, s.end-1, f.Path, err)
	}
	s.scatter(b)
	return nil
}

// fetchRanges is FetchRange for several ranges in one request: refused
// download URLs get one fresh resolve at the commit before the error
// stands.
func (o *origin) fetchRanges(ctx context.Context, ranges []fetch.Range) (io.ReadCloser, error) {
	url, err := o.downloadURL(ctx, false)
	if err != nil {
		return nil, err
	}
	want := fetch.Want{Size: o.size, ETag: o.etag}
	body, err := o.fs.up.GetRanges(ctx, url, o.caller.Auth(), want, ranges)
	if err == nil || !errors.Is(err, fetch.ErrExpired) {
		return body, err
	}
	o.fs.log.Debug("download URL refused; resolving again", "repo", o.at.Repo.String(), "path", o.at.Path, "err", err)
	if url, err = o.downloadURL(ctx, true); err != nil {
		return nil, err
	}
	return o.fs.up.GetRanges(ctx, url, o.caller.Auth(), want, ranges)
}

// host is the scheme and host of the download URL: what a multipart
// verdict is remembered for.
func (o *origin) host(ctx context.Context) (string, error) {
	raw, err := o.downloadURL(ctx, false)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil // fetch refuses the URL, with an error that is safe to show
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// verdict is what is known of a host's answers to multi-range requests.
type verdict int

const (
	verdictUnknown   verdict = iota
	verdictMultipart         // it answered with multipart
	verdictRefused           // it answered otherwise, within refusalMemory
)

// hostVerdicts holds what each download host did with multi-range
// requests.
type hostVerdicts struct {
	mu       sync.Mutex
	multi    map[string]bool      // hosts that answered with multipart
	refusals map[string]time.Time // hosts that did not, and when
}

func (f *File) multipartVerdict(host string) verdict {
	hv := &f.fs.verdicts
	hv.mu.Lock()
	defer hv.mu.Unlock()
	if at, ok := hv.refusals[host]; ok && time.Since(at) < refusalMemory {
		return verdictRefused
	}
	if hv.multi[host] {
		return verdictMultipart
	}
	return verdictUnknown
}

func (f *File) noteMultipart(host string, ok bool) {
	hv := &f.fs.verdicts
	hv.mu.Lock()
	defer hv.mu.Unlock()
	if ok {
		hv.multi[host] = true
		delete(hv.refusals, host)
		return
	}
	delete(hv.multi, host)
	hv.refusals[host] = time.Now()
}
