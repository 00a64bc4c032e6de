package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/server"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// The model's configuration of hubproxy: short trust windows, driven by an
// injected clock, so a run crosses each of them many times; fast failure
// detection, so outages cost little real time.
const (
	modelAccessTTL   = 10 * time.Second
	modelRevisionTTL = 5 * time.Second
	modelPublicTTL   = 5 * time.Minute
)

// modelLog keeps the last lines hubproxy logged, for a failure report.
type modelLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *modelLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, s)
	}
	if len(l.lines) > 400 {
		l.lines = append([]string(nil), l.lines[len(l.lines)-200:]...)
	}
	return len(p), nil
}

func (l *modelLog) tail(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[max(0, len(l.lines)-n):]...)
}

// modelWorld is one fake hub behind relays, two hubproxy nodes in front
// sharing a store (node A, which the run restarts and whose admin API
// stages tensors; node B, which only reads files), and the reference model
// of what the hub has said and done.
type modelWorld struct {
	hub        *hubtest.Hub
	hubRelay   *modelRelay
	cdnRelay   *modelRelay
	clock      *testutil.Clock // the proxy's; only the run moves it
	cfg        app.Config
	h          *app.Handlers
	srv        *httptest.Server
	adm        *httptest.Server // h's admin API, on loopback TCP
	stager     *modelStager     // h's GPU copier
	nodeB      *modelNodeB      // a second hubproxy on the same shared store
	client     *http.Client
	ref        *modelRef
	repos      []hub.Repo
	up         upState
	recovering bool // an outage ended, but hubproxy may not know yet
	log        *modelLog
	counts     map[string]int
}

func newModelWorld(dir string, grace time.Duration) (*modelWorld, error) {
	h, err := hubtest.New(hubtest.Options{})
	if err != nil {
		return nil, err
	}
	w := &modelWorld{hub: h, clock: testutil.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		log: &modelLog{}, counts: map[string]int{}}
	if w.hubRelay, err = newModelRelay(h.URL); err != nil {
		w.close()
		return nil, err
	}
	if w.cdnRelay, err = newModelRelay(h.CDNURL); err != nil {
		w.close()
		return nil, err
	}
	// Redirects to the CDN, and pagination links, go through the relays.
	w.hubRelay.setRewrite(h.CDNURL+"/", w.cdnRelay.URL()+"/", h.URL+"/", w.hubRelay.URL()+"/")
	st := &hubState{revoked: map[string]bool{}}
	w.ref = &modelRef{}
	approved := []string{modelCallers[1].token, modelCallers[revokeCaller].token}
	for r, spec := range modelRepoSpecs {
		w.repos = append(w.repos, hub.MustRepo(spec.typ, spec.id))
		st.gated = append(st.gated, spec.gated)
		st.private = append(st.private, spec.private)
		st.approved = append(st.approved, map[string]bool{approved[0]: true, approved[1]: true})
		var commits []*modelCommit
		if spec.exists {
			files := repoFiles(r, spec.typ, 0)
			id := h.AddRepo(hubtest.RepoSpec{Type: spec.typ, ID: spec.id, Files: files, Gated: spec.gated,
				Private: spec.private, ApprovedTokens: approved})
			commits = append(commits, newModelCommit(id, files))
		}
		w.ref.commits = append(w.ref.commits, commits)
		st.commits = append(st.commits, len(commits))
	}
	w.ref.hist = []snapshot{{at: w.clock.Now(), st: st}}
	store, secret, err := modelSharedStore(dir)
	if err != nil {
		w.close()
		return nil, err
	}
	w.stager = newModelStager()
	w.cfg = app.Config{
		Upstream: w.hubRelay.URL(), CacheDir: filepath.Join(dir, "a"), BlockSize: 16 << 10, ChunkSize: 64 << 10,
		AccessTTL: modelAccessTTL, RevisionTTL: modelRevisionTTL, PublicTTL: modelPublicTTL, OutageGrace: grace,
		MetadataTimeout: 300 * time.Millisecond, FillTimeout: 500 * time.Millisecond, StallTimeout: 300 * time.Millisecond,
		UpstreamCooldown: 50 * time.Millisecond, Now: w.clock.Now,
		SharedStore: store, SharedStoreSecretFile: secret, Stager: w.stager,
	}
	w.client = &http.Client{
		Timeout:       30 * time.Second,
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if err := w.start(); err != nil {
		w.close()
		return nil, err
	}
	if w.nodeB, err = w.startNodeB(filepath.Join(dir, "b")); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// start (re)starts hubproxy on the same cache directory.
func (w *modelWorld) start() error {
	w.stop()
	log := slog.New(slog.NewTextHandler(w.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := app.Build(w.cfg, log)
	if err != nil {
		return fmt.Errorf("building hubproxy: %w", err)
	}
	w.h, w.srv = h, httptest.NewServer(h.Main)
	// As serve.go serves admin-listen host:port: callers without a peer
	// credential, on loopback TCP.
	w.adm = httptest.NewUnstartedServer(h.Admin)
	w.adm.Config.ConnContext = admin.ConnContext
	w.adm.Start()
	return nil
}

func (w *modelWorld) stop() {
	if w.srv != nil {
		w.adm.Close()
		w.srv.Close()
		w.h.Close()
		w.srv, w.adm, w.h = nil, nil, nil
	}
}

func (w *modelWorld) close() {
	w.stop()
	if w.nodeB != nil {
		w.nodeB.close()
	}
	for _, r := range []*modelRelay{w.hubRelay, w.cdnRelay} {
		if r != nil {
			r.close()
		}
	}
	w.hub.Close()
	if w.client != nil {
		w.client.CloseIdleConnections()
	}
}

// setUpstream puts the hub, its CDN and the relays in state u.
func (w *modelWorld) setUpstream(u upState) error {
	const always = 1 << 40
	var f hubtest.Faults
	switch u {
	case upCDN503:
		// A few failures, not a steady state: each failed fill costs
		// seconds of retries that no option shortens.
		f.Status5xx = hubtest.Fault{N: 4, Target: hubtest.TargetCDN}
	case upAll429:
		f.TooManyRequests = hubtest.Fault{N: always}
	case upAPI503:
		f.Status5xx = hubtest.Fault{N: always, Target: hubtest.TargetAPI}
	case upResolve503:
		f.Status5xx = hubtest.Fault{N: always, Target: hubtest.TargetResolve}
	}
	w.hub.SetFaults(f)
	failPath := ""
	switch u {
	case upPath503, upPathHang:
		failPath = passPath
	case upAll503:
		failPath = "/" // the hub's every route; its CDN, as on the Hub, stays up
	}
	if err := w.hubRelay.set(u == upGone, u == upHung, failPath, u == upPathHang); err != nil {
		return err
	}
	if err := w.cdnRelay.set(u == upGone, u == upHung, "", false); err != nil {
		return err
	}
	if w.up.down() && !u.down() {
		w.recovering = true
		if w.nodeB != nil {
			w.nodeB.recovering = true
		}
	}
	w.up = u
	if w.recovering {
		w.settle()
	}
	return nil
}

// settle waits, a little, for hubproxy to notice that an outage ended: its
// breaker lets a call through only after a cool-down (in real time), and
// until then every answer comes from the cache. The call it sends is about
// a repo that does not exist, so it teaches hubproxy nothing the model
// would have to know.
func (w *modelWorld) settle() {
	start := time.Now()
	defer func() { w.counts["ms settling after outages"] += int(time.Since(start).Milliseconds()) }()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := w.client.Get(w.srv.URL + "/api/models/org/missing"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if w.upstreamUp() {
			w.recovering = false
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// down reports whether hubproxy may now answer from what it learnt before
// (an outage, or its end not yet noticed): then its trust windows are
// public-ttl and outage-grace; otherwise access-ttl.
func (w *modelWorld) down() bool {
	if w.recovering && w.upstreamUp() {
		w.recovering = false
	}
	return w.up.down() || w.recovering
}

// upstreamUp is what node A's /readyz says of the upstream.
func (w *modelWorld) upstreamUp() bool { return w.nodeUp(w.srv.URL) }

// nodeUp is what the /readyz of the node at base says of the upstream.
func (w *modelWorld) nodeUp(base string) bool {
	resp, err := w.client.Get(base + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var rd server.Readiness
	return json.NewDecoder(resp.Body).Decode(&rd) == nil && rd.Upstream == "up"
}

// modelAnswer is what hubproxy answered.
type modelAnswer struct {
	status int // 0: no answer at all
	header http.Header
	body   []byte
	err    error // the transport failed (before the answer, or cut it short)
}

func (w *modelWorld) do(req *modelReq) *modelAnswer {
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	base := w.srv.URL
	switch req.node {
	case nodeAdmin:
		base = w.adm.URL
	case nodeB:
		base = w.nodeB.srv.URL
	}
	hr, err := http.NewRequest(req.method, base+req.url, body)
	if err != nil {
		return &modelAnswer{err: err}
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	if req.tok != "" {
		hr.Header.Set("Authorization", "Bearer "+req.tok)
	}
	resp, err := w.client.Do(hr)
	if err != nil {
		return &modelAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &modelAnswer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// apply makes a change to the hub and records it in the model.
func (w *modelWorld) apply(op modelOp) error {
	now, r := w.clock.Now(), op.repo
	switch op.kind {
	case opAccess:
		w.hub.SetAccess(w.repos[r], op.gated, op.priv)
		w.ref.change(now, func(s *hubState) { s.gated[r], s.private[r] = op.gated, op.priv })
	case opRevoke:
		tok := modelCallers[revokeCaller].token
		w.hub.RevokeToken(tok)
		w.ref.change(now, func(s *hubState) { s.revoked[tok] = true })
	case opRegrant:
		tok := modelCallers[revokeCaller].token
		w.hub.GrantToken(tok)
		w.ref.change(now, func(s *hubState) { delete(s.revoked, tok) })
	case opApprove:
		tok := modelCallers[approveCaller].token
		w.hub.ApproveToken(w.repos[r], tok)
		w.ref.change(now, func(s *hubState) { s.approved[r][tok] = true })
	case opPush:
		files := repoFiles(r, modelRepoSpecs[r].typ, len(w.ref.commits[r]))
		id := w.hub.Commit(w.repos[r], "", files)
		w.ref.commits[r] = append(w.ref.commits[r], newModelCommit(id, files))
		w.ref.change(now, func(s *hubState) { s.commits[r]++ })
	case opUpstream:
		return w.setUpstream(op.up)
	case opRestart:
		if op.nodeB {
			return w.nodeB.restart()
		}
		return w.start()
	}
	return nil
}
