package main

import (
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// proxyOver runs a hubproxy over upstream, as `hubproxy serve` would.
func proxyOver(t *testing.T, upstream string) *httptest.Server {
	t.Helper()
	built, err := app.Build(app.Config{Upstream: upstream, CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(built.Main)
	t.Cleanup(func() { srv.Close(); built.Close() })
	return srv
}

// closedAddr is a loopback host:port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestLsTakesTheTokenAsPullDoes reads a private repo with ls and pull, the
// token given by --token or by HF_TOKEN, straight from upstream and through
// a server: both commands must send it the same way.
func TestLsTakesTheTokenAsPullDoes(t *testing.T) {
	// Never a local hubproxy's admin API: pull goes through srv.
	t.Setenv("HUBPROXY_ADMIN_LISTEN", closedAddr(t))
	h := hubtest.NewT(t, hubtest.Options{})
	h.AddRepo(hubtest.RepoSpec{Type: hub.Model, ID: "org/private", Private: true, ApprovedTokens: []string{"hf_good"},
		Files: hubtest.ShardedModel("model", 1, 2, 8, 4)})
	srv := proxyOver(t, h.URL)

	for _, command := range [][]string{{"ls"}, {"pull", "--progress", "none"}} {
		for _, via := range [][]string{{"--upstream", h.URL}, {"--server", srv.URL}} {
			name := command[0] + " " + via[0]
			args := append(append(append([]string{}, command...), via...), "--cache-dir", t.TempDir())

			t.Setenv("HF_TOKEN", "")
			if _, err := runCmd(t, append(args, "org/private")...); err == nil {
				t.Errorf("%s without a token read a private repo", name)
			}
			if out, err := runCmd(t, append(args, "--token", "hf_good", "org/private")...); err != nil {
				t.Errorf("%s --token: %v\n%s", name, err, out)
			}
			t.Setenv("HF_TOKEN", "hf_good")
			if out, err := runCmd(t, append(args, "org/private")...); err != nil {
				t.Errorf("%s with HF_TOKEN: %v\n%s", name, err, out)
			}
		}
	}
}

// TestHelpHidesHFToken: the token flag's default is shown by --help, so it
// must not be the token itself.
func TestHelpHidesHFToken(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_do_not_print")
	for _, c := range []string{"ls", "pull"} {
		out, err := runCmd(t, c, "--help")
		if err != nil || strings.Contains(out, "hf_do_not_print") {
			t.Errorf("%s --help: %v, printed the token:\n%s", c, err, out)
		}
	}
}

// TestServerWithoutScheme: --server host:port means http://host:port in
// every command that takes it.
func TestServerWithoutScheme(t *testing.T) {
	t.Setenv("HUBPROXY_ADMIN_LISTEN", closedAddr(t)) // never a local hubproxy's admin API
	h, _, _ := pullFixture(t)
	srv := proxyOver(t, h.URL)
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	if out, err := runCmd(t, "ls", "--server", hostPort, "org/m"); err != nil || !strings.Contains(out, "model-00001-of-00002.safetensors") {
		t.Errorf("ls --server %s: %v\n%s", hostPort, err, out)
	}
	if out, err := runCmd(t, "pull", "--server", hostPort+"/", "--progress", "none", "org/m"); err != nil || !strings.Contains(out, "pulled 5 files") {
		t.Errorf("pull --server %s/: %v\n%s", hostPort, err, out)
	}
	t.Setenv("HUBPROXY_SERVER", hostPort)
	if out, err := runCmd(t, "ls", "org/m"); err != nil {
		t.Errorf("ls with HUBPROXY_SERVER=%s: %v\n%s", hostPort, err, out)
	}
}

// TestServerMalformed: a --server value that cannot be a hubproxy's address
// is refused up front, naming the flag and the forms it takes.
func TestServerMalformed(t *testing.T) {
	for _, bad := range []string{"ftp://host:8080", "http://", ":8080", "host:99999", "host:port", "http://host:8080/?x=1", "ht tp://host"} {
		for _, c := range []string{"ls", "pull"} {
			_, err := runCmd(t, c, "--server", bad, "org/m")
			if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("--server %q: ", bad)) || !strings.Contains(err.Error(), "want host:port or http://host:port") {
				t.Errorf("%s --server %q: %v", c, bad, err)
			}
		}
	}
}

func TestServerURL(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:8080":          "http://localhost:8080",
		"hubproxy":                "http://hubproxy",
		"[::1]:8080":              "http://[::1]:8080",
		"http://h:8080/":          "http://h:8080",
		"https://hub.example/p/":  "https://hub.example/p",
		"  10.0.0.1:8080  ":       "http://10.0.0.1:8080",
		"http://user:pw@h:1/base": "http://user:pw@h:1/base",
	} {
		if got, err := serverURL(in); err != nil || got != want {
			t.Errorf("serverURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestNoHubproxyAtServer: a --server nothing listens on is named, with
// what to do, instead of Go's dial error and the request URL.
func TestNoHubproxyAtServer(t *testing.T) {
	t.Setenv("HUBPROXY_ADMIN_LISTEN", closedAddr(t)) // never a local hubproxy's admin API
	addr := closedAddr(t)
	want := `no hubproxy at http://` + addr + ` (is it running? start it with "hubproxy serve")`
	for _, c := range []string{"ls", "pull"} {
		for _, server := range []string{addr, "http://" + addr} {
			if _, err := runCmd(t, c, "--server", server, "org/m"); err == nil || err.Error() != want {
				t.Errorf("%s --server %s:\n got %v\nwant %s", c, server, err, want)
			}
		}
	}
}

// TestUnreachableUpstreamSaysSo: without --server, a dead upstream is
// reported as such, not as the in-process proxy's bare "HTTP 502".
func TestUnreachableUpstreamSaysSo(t *testing.T) {
	up := "http://" + closedAddr(t)
	for upstream, why := range map[string]string{up: "connection refused", "http://no-such-host.invalid": "DNS lookup"} {
		for _, c := range []string{"ls", "pull"} {
			_, err := runCmd(t, c, "--upstream", upstream, "--cache-dir", t.TempDir(), "org/m")
			if err == nil {
				t.Fatalf("%s --upstream %s succeeded", c, upstream)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "cannot reach "+upstream+": "+why) || !strings.Contains(msg, "--server") {
				t.Errorf("%s --upstream %s: %s", c, upstream, msg)
			}
			if strings.Contains(msg, "HTTP 502") || strings.Contains(msg, `Get "`) || strings.Contains(msg, "revision=") {
				t.Errorf("%s --upstream %s: a raw error: %s", c, upstream, msg)
			}
		}
	}
}

// TestUpstreamAnswerIsNotUnreachable: an upstream that answers, even with
// an error, is never reported as unreachable.
func TestUpstreamAnswerIsNotUnreachable(t *testing.T) {
	h := hubtest.NewT(t, hubtest.Options{})
	_, err := runCmd(t, "pull", "--upstream", h.URL, "--cache-dir", t.TempDir(), "--progress", "none", "org/absent")
	var se *StatusError
	if !errors.As(err, &se) || strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("pull of a missing repo: %v", err)
	}
}

func TestUnreachableWords(t *testing.T) {
	dial := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://h/x?y=1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	for err, want := range map[error]string{
		&url.Error{Op: "Get", URL: "http://h/", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}}}: "DNS lookup failed",
		&net.DNSError{Err: "i/o timeout", Name: "h", IsTimeout: true}:                                                                                "DNS lookup timed out",
		dial(syscall.ECONNREFUSED): "connection refused",
		dial(syscall.EHOSTUNREACH): "network unreachable",
		dial(errors.New("other")):  "cannot connect",
		&url.Error{Op: "Get", URL: "http://h/", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}: "", // connected, then failed
		errors.New("HTTP 502"): "",
	} {
		if got := unreachable(err); got != want {
			t.Errorf("unreachable(%v) = %q, want %q", err, got, want)
		}
	}
}
