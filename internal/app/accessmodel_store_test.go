package app_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// Store reads in the access model: both nodes share a file:// store, so
// node B fills what node A fetched (for whichever caller) from the store's
// chunks rather than from the CDN. The chunks are keyed by content hash,
// not by caller: node B must still decide each caller's access as node A
// does (upstream, within its own trust windows), and never let a chunk in
// the store stand in for that decision, whether the upstream answers or
// not. Its reads are checked as node A's are.

// modelStoreSecret seals the model cluster's chunks.
const modelStoreSecret = "access-model-store-secret-0123456789"

// modelSharedStore makes the shared store's directory and secret file.
func modelSharedStore(dir string) (store, secretFile string, err error) {
	storeDir := filepath.Join(dir, "store")
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		return "", "", err
	}
	secretFile = filepath.Join(dir, "store-secret")
	if err := os.WriteFile(secretFile, []byte(modelStoreSecret+"\n"), 0o600); err != nil {
		return "", "", err
	}
	return "file://" + storeDir, secretFile, nil
}

// modelNodeB is the second node: node A's configuration on its own cache
// directory, with its own breaker, and so its own view of an outage.
type modelNodeB struct {
	w          *modelWorld
	cfg        app.Config
	h          *app.Handlers
	srv        *httptest.Server
	recovering bool    // an outage ended, but node B may not know yet
	storeRead  float64 // bytes it had read from the store at the last look
}

func (w *modelWorld) startNodeB(dir string) (*modelNodeB, error) {
	b := &modelNodeB{w: w, cfg: w.cfg}
	b.cfg.CacheDir, b.cfg.Stager = dir, newModelStager()
	return b, b.restart()
}

// restart (re)starts node B on the same cache directory.
func (b *modelNodeB) restart() error {
	b.close()
	log := slog.New(slog.NewTextHandler(b.w.log, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", "B")
	h, err := app.Build(b.cfg, log)
	if err != nil {
		return fmt.Errorf("building node B: %w", err)
	}
	// A fresh breaker, and fresh metrics.
	b.h, b.srv, b.recovering, b.storeRead = h, httptest.NewServer(h.Main), false, 0
	return nil
}

func (b *modelNodeB) close() {
	if b.srv != nil {
		b.srv.Close()
		b.h.Close()
		b.srv, b.h = nil, nil
	}
}

// down is modelWorld.down for node B.
func (b *modelNodeB) down() bool {
	if b.recovering && b.upstreamUp() {
		b.recovering = false
	}
	return b.w.up.down() || b.recovering
}

func (b *modelNodeB) upstreamUp() bool { return b.w.nodeUp(b.srv.URL) }

// storeBytesRead is what node B's metrics say it has read from the store.
func (b *modelNodeB) storeBytesRead() float64 {
	resp, err := b.w.client.Get(b.srv.URL + "/metrics")
	if err != nil {
		return b.storeRead
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `hubproxy_store_bytes_total{direction="read"} `); ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				return n
			}
		}
	}
	return b.storeRead
}

// countNewOps counts how stagings and node B's reads were answered, and
// which of node B's were served with bytes from the store: the histories
// must have each, or the properties were never put to the test.
func (w *modelWorld) countNewOps(op modelOp, ans *modelAnswer) {
	what := map[opKind]string{opStage: "gpu stage", opStoreRead: "node B read"}[op.kind]
	if what == "" {
		return
	}
	code := ans.header.Get("X-Error-Code")
	outcome := strconv.Itoa(ans.status) + " " + code
	switch {
	case ans.status == 0:
		outcome = "no answer"
	case ans.status < 300:
		outcome = "served"
	case ans.status == http.StatusUnauthorized || ans.status == http.StatusForbidden ||
		ans.status == http.StatusNotFound && code == hubtest.CodeRepoNotFound:
		outcome = "refused"
	case ans.status >= 500:
		outcome = "unavailable"
	}
	w.counts[what+": "+outcome]++
	if w.up.down() {
		w.counts[what+" while the upstream is down: "+outcome]++
	}
	if op.kind != opStoreRead {
		return
	}
	n := w.nodeB.storeBytesRead()
	if n > w.nodeB.storeRead && ans.status < 300 && ans.status > 0 {
		w.counts["node B read: served with bytes from the shared store"]++
		if w.up.down() {
			w.counts["node B read while the upstream is down: served with bytes from the shared store"]++
		}
	}
	w.nodeB.storeRead = n
}
