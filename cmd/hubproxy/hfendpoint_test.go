package main

import (
	"strings"
	"testing"
)

// TestHFEndpointIsTheDefaultServer: with no flag choosing, ls and pull go
// through the hubproxy HF_ENDPOINT names, as the user's other hub clients
// do; an in-process flag, or HF_ENDPOINT naming the Hub itself, keeps the
// in-process mode.
func TestHFEndpointIsTheDefaultServer(t *testing.T) {
	h, _, _ := pullFixture(t)
	srv := proxyOver(t, h.URL)
	t.Setenv("HUBPROXY_SERVER", "")
	t.Setenv("HUBPROXY_ADMIN_LISTEN", closedAddr(t))

	// The fake hub is reachable only through srv (the in-process default
	// upstream is huggingface.co): success means HF_ENDPOINT was used.
	t.Setenv("HF_ENDPOINT", srv.URL)
	if out, err := runCmd(t, "ls", "org/m"); err != nil || !strings.Contains(out, "model-00001-of-00002.safetensors") {
		t.Errorf("ls with HF_ENDPOINT=%s: %v\n%s", srv.URL, err, out)
	}
	if out, err := runCmd(t, "pull", "--progress", "none", "org/m"); err != nil || !strings.Contains(out, "pulled 5 files") {
		t.Errorf("pull with HF_ENDPOINT=%s: %v\n%s", srv.URL, err, out)
	}

	// --upstream (or --cache-dir, --config) means in process.
	if out, err := runCmd(t, "ls", "--upstream", h.URL, "--cache-dir", t.TempDir(), "org/m"); err != nil {
		t.Errorf("ls --upstream with HF_ENDPOINT set: %v\n%s", err, out)
	}
	for _, hubURL := range []string{"https://huggingface.co", "https://hf.co/"} {
		t.Setenv("HF_ENDPOINT", hubURL)
		if got := endpointServer(newPullCmd().Flags()); got != "" {
			t.Errorf("HF_ENDPOINT=%s taken for a hubproxy (%q)", hubURL, got)
		}
	}

	// A bad HF_ENDPOINT is named as the source of the bad address.
	t.Setenv("HF_ENDPOINT", "ftp://proxy:8080")
	if _, err := runCmd(t, "ls", "org/m"); err == nil || !strings.HasPrefix(err.Error(), `HF_ENDPOINT "ftp://proxy:8080": `) {
		t.Errorf("ls with a malformed HF_ENDPOINT: %v", err)
	}
	// --server wins over HF_ENDPOINT.
	if out, err := runCmd(t, "ls", "--server", srv.URL, "org/m"); err != nil {
		t.Errorf("ls --server with HF_ENDPOINT set: %v\n%s", err, out)
	}
}
