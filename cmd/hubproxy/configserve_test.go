package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/testutil"
)

// execute runs the hubproxy command tree with args, as main does, ending it
// after within (a serve that should have refused to start would otherwise
// serve on).
func execute(t *testing.T, within time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// isolate keeps a developer's HUBPROXY_CONFIG and variables out of a test
// that runs the commands.
func isolate(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix+"_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// config fails, with serve's very message, on every value serve refuses,
// those only serve reads (its listeners, its logger) included.
func TestConfigRefusesWhatServeRefuses(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "verbose"}, `log-level "verbose": want debug, info, warn or error`},
		{[]string{"--log-format", "xml"}, `log-format "xml": want text or json`},
		{[]string{"--listen", "28095"}, `listen "28095": want host:port or :port; for port 28095 on every interface write ":28095"`},
		{[]string{"--listen", "localhost:http-alt"}, `listen "localhost:http-alt": port "http-alt" is not a number`},
		{[]string{"--admin-listen", "0.0.0.0:9999"}, `admin-listen "0.0.0.0:9999": must be a Unix socket or a loopback address`},
		{[]string{"--admin-listen", "/tmp/a.sock"}, `admin-listen "/tmp/a.sock": a Unix socket is written unix:///tmp/a.sock`},
		{[]string{"--admin-listen", "unix://relative.sock"}, `admin-listen "unix://relative.sock": want an absolute socket path`},
		{[]string{"--upstream", "ftp://x"}, `upstream "ftp://x"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			// Every other value is one serve accepts, so a check missing
			// from serve would have it serve (until execute ends it).
			base := []string{"--cache-dir", t.TempDir(), "--offline", "--listen", "127.0.0.1:0", "--admin-listen", ""}
			args := append(base, tc.args...)
			_, cerr := execute(t, 10*time.Second, append([]string{"config"}, args...)...)
			_, serr := execute(t, 10*time.Second, append([]string{"serve"}, args...)...)
			if cerr == nil || serr == nil {
				t.Fatalf("config: %v; serve: %v; want both to refuse", cerr, serr)
			}
			if cerr.Error() != serr.Error() {
				t.Errorf("config and serve disagree:\nconfig: %v\nserve:  %v", cerr, serr)
			}
			if !strings.Contains(serr.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", serr, tc.want)
			}
		})
	}
	// And what serve takes, config takes.
	if _, err := execute(t, 10*time.Second, "config", "--listen", "127.0.0.1:0", "--admin-listen", "[::1]:0", "--log-level", "DEBUG"); err != nil {
		t.Errorf("config refused a good configuration: %v", err)
	}
}

// An admin-listen that cannot be bound stops serve, with the path and the
// reason; so does another hubproxy's socket, below. Only the default
// failing is a warning (TestDefaultAdminListenFailingWarns).
func TestServeRefusesAnAdminListenItCannotBind(t *testing.T) {
	isolate(t)
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	sock := filepath.Join(notDir, "admin.sock") // its directory is a file
	_, err := execute(t, 20*time.Second, "serve", "--cache-dir", t.TempDir(), "--offline", "--listen", "127.0.0.1:0", "--admin-listen", "unix://"+sock)
	if err == nil || !strings.Contains(err.Error(), "admin-listen unix://"+sock) {
		t.Fatalf("serve: %v, want it to refuse admin-listen unix://%s", err, sock)
	}
}

// The default socket failing to bind (its directory cannot be created) is
// a warning and no admin API; the same failure of any other value stops
// serve.
func TestDefaultAdminListenFailingWarns(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	def := "unix://" + filepath.Join(notDir, "admin.sock") // stands for /run/hubproxy/admin.sock
	var logs bytes.Buffer
	ln, err := openAdmin(def, def, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || ln != nil {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("openAdmin(default) = %v, %v; want no listener and no error", ln, err)
	}
	if !strings.Contains(logs.String(), "admin API disabled") {
		t.Errorf("no warning: %q", logs.String())
	}
	if _, err := openAdmin("unix://"+filepath.Join(notDir, "other.sock"), def, slog.New(slog.DiscardHandler)); err == nil {
		t.Errorf("another value that cannot be bound was not refused")
	}
}

// A second serve on the admin socket of a running one refuses to start, and
// the first keeps its socket.
func TestTwoServesOnOneAdminSocket(t *testing.T) {
	isolate(t)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	args := []string{"serve", "--offline", "--listen", "127.0.0.1:0", "--admin-listen", "unix://" + sock, "--log-level", "warn"}
	first := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		root := newRootCmd()
		root.SetArgs(append(args, "--cache-dir", t.TempDir()))
		first <- root.ExecuteContext(ctx)
	}()
	defer func() {
		cancel()
		if err := <-first; err != nil {
			t.Errorf("first serve: %v", err)
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("the first serve left its socket behind: %v", err)
		}
	}()
	testutil.Eventually(t, time.Minute, "the first serve to answer on its admin socket", func() bool { return answers(sock) })
	_, err := execute(t, 20*time.Second, append(args, "--cache-dir", t.TempDir())...)
	if err == nil || !strings.Contains(err.Error(), "admin socket "+sock+" is in use by another process") {
		t.Fatalf("second serve: %v, want it to refuse the socket in use", err)
	}
	if !answers(sock) {
		t.Errorf("the first serve's socket no longer answers after the second tried it")
	}
}

// The start-up configuration is a short summary at info, and every key on
// a line of its own at debug, secrets hidden.
func TestStartupConfigLines(t *testing.T) {
	l, err := loadWith(t, "", map[string]string{"HUBPROXY_UPSTREAM_TOKEN": "hf_verysecretvalue"},
		"--cache-dir", "/var/cache/hp", "--cache-max-bytes", "50Gi", "--shared-store", "file:///shared", "--admin-listen", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		logConfig(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})), l)
		out := buf.String()
		if strings.Contains(out, "hf_verysecretvalue") {
			t.Fatalf("a secret was logged:\n%s", out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		summary := lines[0]
		for _, want := range []string{"level=INFO", "upstream=https://huggingface.co", "listen=:8080", "cache_dir=/var/cache/hp",
			"cache_max_bytes=50GiB", "shared_store=yes", "offline=false", `admin_listen=""`} {
			if !strings.Contains(summary, want) {
				t.Errorf("summary %q lacks %s", summary, want)
			}
		}
		if len(summary) > 400 {
			t.Errorf("summary is %d characters", len(summary))
		}
		wantLines := 1
		if level == slog.LevelDebug {
			wantLines += len(configKeys())
		}
		if len(lines) != wantLines {
			t.Fatalf("at %v: %d lines, want %d:\n%s", level, len(lines), wantLines, out)
		}
		if level == slog.LevelDebug && !strings.Contains(out, `key=cache-max-bytes value=50GiB source="flag --cache-max-bytes"`) {
			t.Errorf("no per-key line for cache-max-bytes:\n%s", out)
		}
	}
}
