package admin_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// Profiles are served only when the pprof key asks for them, and the
// command line they show never carries a credential.
func TestPprofIsOptInAndHidesSecrets(t *testing.T) {
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	e := newEnv(t, hubtest.Options{}, nil)
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/goroutine"} {
		if code, _ := get(e.Admin, p); code != http.StatusNotFound {
			t.Errorf("pprof off: GET %s = %d, want 404", p, code)
		}
	}

	// The process's command line, as serve would be started with secrets
	// on it (os.Args is what net/http/pprof reads).
	args := os.Args
	t.Cleanup(func() { os.Args = args })
	os.Args = []string{"hubproxy", "serve", "--upstream-token", "hf_SECRET", "--upstream=http://u:SECRET@hub", "--shared-store", "s3://b?secret_key=SECRET", "--offline"}
	e = newEnv(t, hubtest.Options{}, func(c *app.Config) { c.Pprof = true })
	code, body := get(e.Admin, "/debug/pprof/cmdline")
	if code != http.StatusOK {
		t.Fatalf("pprof on: cmdline = %d", code)
	}
	if strings.Contains(body, "SECRET") {
		t.Errorf("cmdline shows a secret: %q", body)
	}
	if !strings.Contains(body, "serve\x00--upstream-token\x00") || !strings.Contains(body, "--offline") {
		t.Errorf("cmdline lost its shape: %q", body)
	}
	if code, body := get(e.Admin, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("pprof on: goroutine = %d %.80q", code, body)
	}
}
