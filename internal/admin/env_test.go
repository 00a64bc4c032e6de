package admin_test

import (
	"net/http/httptest"
	"testing"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/apptest"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// env is one fake hub plus one whole hubproxy in front of it (app.Build),
// as serve runs it: the admin API stages through the same resolver, cache
// and tensor service as the public listener, and reports to its metrics.
type env = apptest.Env

func newEnv(t *testing.T, hopts hubtest.Options, tweak func(*app.Config)) *env {
	t.Helper()
	return apptest.New(t, hopts, tweak)
}

// newAdmin restarts e's proxy with st as its GPU copier and serves its
// admin API on loopback TCP, as serve.go does for admin-listen host:port:
// its callers have no peer credential (see adminAs for ones that do).
func newAdmin(t *testing.T, e *env, st admin.Stager) *httptest.Server {
	t.Helper()
	e.Cfg.Stager = st
	e.Start()
	srv := httptest.NewUnstartedServer(e.Admin)
	srv.Config.ConnContext = admin.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

var model = hub.MustRepo(hub.Model, "org/model")

// listing is the body of GET /models/{repo}/tensors, as far as these tests
// read it.
type listing struct {
	Tensors []struct {
		Name   string `json:"name"`
		File   string `json:"file"`
		Offset uint64 `json:"offset"`
		Length uint64 `json:"length"`
	} `json:"tensors"`
}
