package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/tensor"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestLsStraightAgainstUpstreamAndThroughAServer(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/m", Files: hubtest.ShardedModel("model", 2, 3, 8, 4)})

	out, err := runCLI(t, "ls", "--upstream", h.URL, "--cache-dir", t.TempDir(), "org/m")
	if err != nil {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	for _, want := range []string{"NAME", "DTYPE", "BF16", "[8, 4]", "model-00002-of-00002.safetensors", "6 tensors in 2 files"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls output lacks %q:\n%s", want, out)
		}
	}

	built, err := app.Build(app.Config{Upstream: h.URL, CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer built.Close()
	srv := httptest.NewServer(built.Main)
	defer srv.Close()
	out, err = runCLI(t, "ls", "--server", srv.URL, "--json", "org/m")
	if err != nil {
		t.Fatalf("ls --server: %v\n%s", err, out)
	}
	var l tensor.Listing
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Totals.Tensors != 6 {
		t.Errorf("ls --json: %v, %+v", err, l.Totals)
	}
	if _, err := runCLI(t, "ls", "--server", srv.URL, "org/absent"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("ls of a missing repo: %v", err)
	}
}
