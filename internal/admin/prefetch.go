package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// POST /cache/prefetch fills the cache with a repo's files, server-side:
// what `hubproxy pull --server` did by downloading every byte to the
// machine running it, only to throw them away.
//
// Every request it makes goes through the public listener's own handler
// (Options.Server), in process, with the caller's Authorization: the repo
// info and tree listing through the hub API routes, each file as a GET of
// its /resolve/ URL. So admission (allow-repos, client tokens), the
// per-caller resolution and access check, the fill and its verification,
// the access log and the metrics are exactly a client's; the prefetch is
// never a way around them. The answer streams NDJSON, one PrefetchEvent
// per line.

// PrefetchRequest is the body of POST /cache/prefetch.
type PrefetchRequest struct {
	Repo     string `json:"repo"`
	RepoType string `json:"repo_type,omitempty"` // model (default), dataset or space
	Revision string `json:"revision,omitempty"`  // default main
	// Include and Exclude are huggingface_hub's allow_patterns and
	// ignore_patterns (hub.SelectFile).
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	// Files names exact paths instead of patterns.
	Files []string `json:"files,omitempty"`
	// Jobs is how many files are filled at once (default 4, at most 16).
	Jobs int `json:"jobs,omitempty"`
}

// PrefetchEvent is one line of the answer: "start" (the commit, how many
// files and bytes), "progress" (a file being filled: its bytes so far),
// "file" (a file done: hit, fetched or partial, or failed with error), and
// last "done" (totals; failed > 0 means some file failed).
type PrefetchEvent struct {
	Event  string `json:"event"`
	Commit string `json:"commit,omitempty"`
	Path   string `json:"path,omitempty"`
	Size   int64  `json:"size"`  // the file's, or for start and done all files'
	Bytes  int64  `json:"bytes"` // bytes done
	Cache  string `json:"cache,omitempty"`
	Error  string `json:"error,omitempty"`
	Files  int    `json:"files,omitempty"`
	Hits   int    `json:"hits,omitempty"`
	Failed int    `json:"failed,omitempty"`
}

const (
	maxPrefetchBody  = 1 << 20
	maxPrefetchJobs  = 16
	prefetchProgress = time.Second // how often a file in flight is reported
)

// prefetchHost is the Host of the in-process requests; pagination links
// the public listener writes onto it are followed by path alone.
const prefetchHost = "hubproxy.admin"

func decodePrefetch(r *http.Request) (PrefetchRequest, hub.Repo, error) {
	var req PrefetchRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPrefetchBody+1))
	switch {
	case err != nil:
		return req, hub.Repo{}, &requestError{"prefetch request: " + err.Error()}
	case len(body) > maxPrefetchBody:
		return req, hub.Repo{}, &tooLargeError{maxPrefetchBody}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, hub.Repo{}, &requestError{"prefetch request: " + err.Error()}
	}
	if req.Revision == "" {
		req.Revision = "main"
	}
	if req.RepoType == "" {
		req.RepoType = string(hub.Model)
	}
	typ, ok := hub.ParseRepoType(req.RepoType + "s")
	if !ok {
		return req, hub.Repo{}, &requestError{fmt.Sprintf("prefetch request: repo_type %q: want model, dataset or space", req.RepoType)}
	}
	if len(req.Files) > 0 && len(req.Include)+len(req.Exclude) > 0 {
		return req, hub.Repo{}, &requestError{"prefetch request: give files or include/exclude, not both"}
	}
	switch {
	case req.Jobs < 0:
		return req, hub.Repo{}, &requestError{"prefetch request: jobs must be positive"}
	case req.Jobs == 0:
		req.Jobs = 4
	}
	req.Jobs = min(req.Jobs, maxPrefetchJobs)
	repo, err := hub.ParseRepo(typ, req.Repo)
	if err == nil {
		err = hub.ValidRevision(req.Revision)
	}
	for _, f := range req.Files {
		if err == nil {
			err = hub.ValidPath(f)
		}
	}
	return req, repo, err
}

// treeFile is one entry of the tree listing.
type treeFile struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
}

func (a *admin) prefetch(w http.ResponseWriter, r *http.Request) {
	req, repo, err := decodePrefetch(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	// The prefetch's requests carry its request id (the plumbing has set
	// it on the answer), so the access log ties them to it.
	p := &prefetcher{h: a.opts.Server, auth: r.Header.Get("Authorization"), id: cmp.Or(w.Header().Get("X-Request-Id"), r.Header.Get("X-Request-Id"))}
	api := "/api/" + repo.Type().Plural() + "/" + repo.ID()
	var info struct{ SHA string }
	if ans := p.getJSON(r.Context(), api+"/revision/"+url.PathEscape(req.Revision), &info); ans != nil {
		ans.relay(w)
		return
	}
	if !hub.IsCommit(info.SHA) {
		a.writeError(w, r, fmt.Errorf("the repo info of %s names no commit", repo))
		return
	}
	all, ans := p.tree(r.Context(), api+"/tree/"+info.SHA+"?recursive=true&expand=false")
	if ans != nil {
		ans.relay(w)
		return
	}
	files, err := choose(all, req)
	if err != nil {
		a.writeError(w, r, err)
		return
	}

	// From here the answer is a stream: each file's outcome is a line.
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := &eventWriter{w: w, rc: http.NewResponseController(w)}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	out.send(PrefetchEvent{Event: "start", Commit: info.SHA, Files: len(files), Size: total})

	work := make(chan treeFile)
	done := PrefetchEvent{Event: "done", Commit: info.SHA, Files: len(files), Size: total}
	var wg sync.WaitGroup
	for range min(req.Jobs, len(files)) {
		wg.Go(func() {
			for f := range work {
				ev := p.fill(r.Context(), repo, info.SHA, f, out)
				out.mu.Lock()
				done.Bytes += ev.Bytes
				if ev.Error != "" {
					done.Failed++
				} else if ev.Cache == "hit" {
					done.Hits++
				}
				out.mu.Unlock()
				out.send(ev)
			}
		})
	}
feed:
	for _, f := range files {
		select {
		case work <- f:
		case <-r.Context().Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := r.Context().Err(); err != nil {
		return // the caller left: nobody reads the rest
	}
	out.send(done)
}

// choose picks the files req names, or those its patterns select.
func choose(all []treeFile, req PrefetchRequest) ([]treeFile, error) {
	var files []treeFile
	if len(req.Files) > 0 {
		var missing []string
		for _, name := range req.Files {
			i := slices.IndexFunc(all, func(f treeFile) bool { return f.Path == name })
			if i < 0 {
				missing = append(missing, strconv.Quote(name))
			} else if !slices.ContainsFunc(files, func(f treeFile) bool { return f.Path == name }) {
				files = append(files, all[i])
			}
		}
		if len(missing) > 0 {
			return nil, &requestError{fmt.Sprintf("%s: no such file at %s (of %d files)", strings.Join(missing, ", "), req.Revision, len(all))}
		}
		return files, nil
	}
	for _, f := range all {
		if hub.SelectFile(f.Path, req.Include, req.Exclude) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, &requestError{fmt.Sprintf("no file matches include %q exclude %q (of %d files)", req.Include, req.Exclude, len(all))}
	}
	return files, nil
}

// prefetcher makes a prefetch's requests to the public listener, as its
// caller.
type prefetcher struct {
	h    http.Handler
	auth string // the caller's Authorization
	id   string // the prefetch's request id, carried into the log lines of its requests
}

// answer is a public listener's answer that was not a success, relayed to
// the prefetch's caller as it is (its status, error code and message).
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (ans *answer) relay(w http.ResponseWriter) {
	for _, k := range []string{"Content-Type", "X-Error-Code", "X-Error-Message", "WWW-Authenticate"} {
		if v := ans.header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(ans.status)
	w.Write(ans.body)
}

// do serves one request through the public handler into rec.
func (p *prefetcher) do(ctx context.Context, method, target string, hdr http.Header, rec http.ResponseWriter) (err error) {
	// The admin request's cancellation, none of its values: the public
	// listener's router and middleware would take the admin's route
	// context and request state for their own, and several files are
	// filled at once.
	req, err := http.NewRequestWithContext(cancelOnly{ctx}, method, "http://"+prefetchHost+target, nil)
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	if p.id != "" {
		req.Header.Set("X-Request-Id", p.id)
	}
	req.RemoteAddr = "admin-prefetch"
	// A read that fails part-way aborts the public answer with
	// http.ErrAbortHandler, which net/http would catch: here it is ours.
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			err = errors.New("the transfer was aborted (see the server log)")
		}
	}()
	p.h.ServeHTTP(rec, req)
	return nil
}

// cancelOnly is a context that ends with its parent and carries none of
// its values.
type cancelOnly struct{ parent context.Context }

func (c cancelOnly) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c cancelOnly) Done() <-chan struct{}       { return c.parent.Done() }
func (c cancelOnly) Err() error                  { return c.parent.Err() }
func (c cancelOnly) Value(any) any               { return nil }

// getJSON GETs target and decodes a 2xx body into v; anything else is the
// answer to relay.
func (p *prefetcher) getJSON(ctx context.Context, target string, v any) *answer {
	rec := &recorder{header: http.Header{}}
	if err := p.do(ctx, http.MethodGet, target, nil, rec); err != nil {
		return internalAnswer(err)
	}
	if rec.status()/100 != 2 {
		return &answer{status: rec.status(), header: rec.header, body: rec.body.Bytes()}
	}
	if err := json.Unmarshal(rec.body.Bytes(), v); err != nil {
		return internalAnswer(fmt.Errorf("decoding %s: %w", target, err))
	}
	return nil
}

var nextLink = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// tree lists every file of the tree at target, following its pagination.
func (p *prefetcher) tree(ctx context.Context, target string) ([]treeFile, *answer) {
	var files []treeFile
	for pages := 0; target != ""; pages++ {
		if pages > 100_000 {
			return nil, internalAnswer(errors.New("the tree listing does not end"))
		}
		rec := &recorder{header: http.Header{}}
		if err := p.do(ctx, http.MethodGet, target, nil, rec); err != nil {
			return nil, internalAnswer(err)
		}
		if rec.status()/100 != 2 {
			return nil, &answer{status: rec.status(), header: rec.header, body: rec.body.Bytes()}
		}
		var page []treeFile
		if err := json.Unmarshal(rec.body.Bytes(), &page); err != nil {
			return nil, internalAnswer(fmt.Errorf("decoding the tree listing: %w", err))
		}
		for _, f := range page {
			if f.Type == "file" {
				files = append(files, f)
			}
		}
		target = ""
		if m := nextLink.FindStringSubmatch(rec.header.Get("Link")); m != nil {
			if u, err := url.Parse(m[1]); err == nil {
				target = u.RequestURI()
			}
		}
	}
	slices.SortFunc(files, func(a, b treeFile) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

func internalAnswer(err error) *answer {
	body, _ := json.Marshal(map[string]string{"error": err.Error()})
	return &answer{status: http.StatusInternalServerError, header: http.Header{"Content-Type": {"application/json"}}, body: body}
}

// fill GETs one file through the public listener, which fills the cache,
// and says how it went. A file the cache holds whole is known from the
// first byte's answer (X-Hubproxy-Cache: hit) and not read again.
func (p *prefetcher) fill(ctx context.Context, repo hub.Repo, commit string, f treeFile, out *eventWriter) PrefetchEvent {
	ev := PrefetchEvent{Event: "file", Path: f.Path, Size: f.Size}
	segs := strings.Split(f.Path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	target := "/" + repo.Type().URLPrefix() + repo.ID() + "/resolve/" + commit + "/" + strings.Join(segs, "/")
	fail := func(err error) PrefetchEvent {
		ev.Error = err.Error()
		return ev
	}
	// What the cache held before: the probe's answer says (the GET after
	// it finds the probe's own block there).
	state := ""
	if f.Size > 0 {
		probe := &recorder{header: http.Header{}}
		if err := p.do(ctx, http.MethodGet, target, http.Header{"Range": {"bytes=0-0"}}, probe); err != nil {
			return fail(err)
		}
		if probe.status()/100 != 2 {
			return fail(answerError(probe.status(), probe.header, probe.body.Bytes()))
		}
		state = probe.header.Get("X-Hubproxy-Cache")
		if state == "hit" {
			ev.Cache, ev.Bytes = "hit", f.Size
			return ev
		}
	}
	body := &counter{header: http.Header{}, path: f.Path, size: f.Size, out: out}
	err := p.do(ctx, http.MethodGet, target, nil, body)
	switch {
	case err != nil:
		return fail(err)
	case body.status()/100 != 2:
		return fail(answerError(body.status(), body.header, body.errBody))
	case body.n != f.Size:
		return fail(fmt.Errorf("received %d bytes, the listing says %d", body.n, f.Size))
	}
	ev.Bytes = body.n
	if state == "" {
		state = body.header.Get("X-Hubproxy-Cache")
	}
	switch state {
	case "hit", "partial":
		ev.Cache = state
	default:
		ev.Cache = "fetched"
	}
	return ev
}

// answerError is a failed file answer in words: its message and code.
func answerError(status int, header http.Header, body []byte) error {
	msg := header.Get("X-Error-Message")
	var b struct{ Error string }
	if json.Unmarshal(body, &b) == nil && b.Error != "" {
		msg = b.Error
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	if code := header.Get("X-Error-Code"); code != "" {
		return fmt.Errorf("%s (HTTP %d, %s)", msg, status, code)
	}
	return fmt.Errorf("%s (HTTP %d)", msg, status)
}

// recorder keeps a small answer whole.
type recorder struct {
	code   int
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// counter takes a file's body, counting and dropping it (the fill is the
// point), and reports its progress now and then.
type counter struct {
	code    int
	header  http.Header
	errBody []byte // the body of a non-2xx answer
	n       int64
	path    string
	size    int64
	out     *eventWriter
	last    time.Time
}

func (c *counter) Header() http.Header { return c.header }
func (c *counter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *counter) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	if c.code/100 != 2 {
		if room := 64<<10 - len(c.errBody); room > 0 {
			c.errBody = append(c.errBody, b[:min(len(b), room)]...)
		}
		return len(b), nil
	}
	c.n += int64(len(b))
	if now := time.Now(); now.Sub(c.last) >= prefetchProgress {
		if !c.last.IsZero() {
			c.out.send(PrefetchEvent{Event: "progress", Path: c.path, Size: c.size, Bytes: c.n})
		}
		c.last = now
	}
	return len(b), nil
}
func (c *counter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

// eventWriter writes the answer's lines, one at a time, each flushed so
// the caller sees progress as it happens.
type eventWriter struct {
	mu sync.Mutex
	w  io.Writer
	rc *http.ResponseController
}

func (e *eventWriter) send(ev PrefetchEvent) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.w.Write(append(b, '\n'))
	e.rc.Flush()
}
