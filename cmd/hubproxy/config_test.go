package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hubproxy.yaml")
	os.WriteFile(file, []byte("listen: \":9000\"\nread-ahead: 7\ncache-max-bytes: 2GiB\nrevision-ttl: 1m\ncache-dir: /from/file\n"), 0o644)
	t.Setenv("HUBPROXY_CONFIG", file)
	t.Setenv("HUBPROXY_READ_AHEAD", "9")
	t.Setenv("HUBPROXY_UPSTREAM_TOKEN", "hf_secret")

	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addServeFlags(fs)
	if err := fs.Parse([]string{"--cache-dir", "/from/flag"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(fs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != ":9000" || cfg.ReadAhead != 9 || cfg.CacheDir != "/from/flag" ||
		cfg.CacheMaxBytes != 2<<30 || cfg.RevisionTTL != time.Minute || cfg.UpstreamToken != "hf_secret" {
		t.Errorf("config = %+v", cfg)
	}
	if cfg.Upstream != "https://huggingface.co" || cfg.BlockSize != 64<<10 {
		t.Errorf("defaults lost: %+v", cfg)
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--upstream", "ftp://x"},
		{"--cache-max-bytes", "lots"},
		{"--block-size", "1MiB", "--chunk-size", "64KiB"},
		{"--log-level", "loud"},
	} {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		addServeFlags(fs)
		fs.Parse(args)
		cfg, err := loadConfig(fs)
		if err == nil {
			_, err = newLogger(cfg.LogLevel, cfg.LogFormat)
		}
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestAdminListenerIsLocalOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9000", ":9000", "10.0.0.1:9000", "example.com:9000", "nonsense"} {
		if ln, err := listenAdmin(addr); err == nil {
			ln.Close()
			t.Errorf("admin-listen %q accepted", addr)
		}
	}
	sock := filepath.Join(t.TempDir(), "sub", "admin.sock")
	ln, err := listenAdmin("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, %v", fi.Mode(), err)
	}
	ln.Close()
	if ln, err := listenAdmin("127.0.0.1:0"); err != nil {
		t.Errorf("loopback refused: %v", err)
	} else {
		ln.Close()
	}
}

// Flag over variable over file over default, for a key of every kind: each
// layer holds a different value, and the source `hubproxy config` names is
// the layer whose value won.
func TestPrecedenceEveryKind(t *testing.T) {
	file := "listen: \":1001\"\nrevision-ttl: 1m\noffline: true\nread-ahead: 11\ncache-max-bytes: 1GiB\nredirect-hosts: [file.example]\n"
	env := map[string]string{
		"HUBPROXY_LISTEN": ":1002", "HUBPROXY_REVISION_TTL": "2m", "HUBPROXY_OFFLINE": "false",
		"HUBPROXY_READ_AHEAD": "12", "HUBPROXY_CACHE_MAX_BYTES": "2GiB", "HUBPROXY_REDIRECT_HOSTS": "env.example",
	}
	flags := []string{"--listen", ":1003", "--revision-ttl", "3m", "--offline", "--read-ahead", "13", "--cache-max-bytes", "3GiB", "--redirect-hosts", "flag.example"}
	type want struct {
		listen   string
		ttl      time.Duration
		offline  bool
		ahead    int
		maxBytes int64
		hosts    []string
		source   string // of every key above; "file" stands for "file PATH"
	}
	d := defaults()
	for name, tc := range map[string]struct {
		file  string
		env   map[string]string
		flags []string
		want  want
	}{
		"flag wins":    {file, env, flags, want{":1003", 3 * time.Minute, true, 13, 3 << 30, []string{"flag.example"}, "flag"}},
		"env wins":     {file, env, nil, want{":1002", 2 * time.Minute, false, 12, 2 << 30, []string{"env.example"}, "env"}},
		"file wins":    {file, nil, nil, want{":1001", time.Minute, true, 11, 1 << 30, []string{"file.example"}, "file"}},
		"default wins": {"", nil, nil, want{d.Listen, d.RevisionTTL, d.Offline, d.ReadAhead, d.CacheMaxBytes, d.RedirectHosts, "default"}},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := loadWith(t, tc.file, tc.env, tc.flags...)
			if err != nil {
				t.Fatal(err)
			}
			c := l.cfg
			got := want{c.Listen, c.RevisionTTL, c.Offline, c.ReadAhead, c.CacheMaxBytes, c.RedirectHosts, tc.want.source}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			for key, variable := range map[string]string{
				"listen": "HUBPROXY_LISTEN", "revision-ttl": "HUBPROXY_REVISION_TTL", "offline": "HUBPROXY_OFFLINE",
				"read-ahead": "HUBPROXY_READ_AHEAD", "cache-max-bytes": "HUBPROXY_CACHE_MAX_BYTES", "redirect-hosts": "HUBPROXY_REDIRECT_HOSTS",
			} {
				wantSrc := map[string]source{
					"flag": {"flag", "--" + key}, "env": {"env", variable},
					"file": {"file", os.Getenv("HUBPROXY_CONFIG")}, "default": {"default", ""},
				}[tc.want.source]
				if l.sources[key] != wantSrc {
					t.Errorf("%s: source %q, want %q", key, l.sources[key], wantSrc)
				}
			}
		})
	}
}

// A variable set to nothing is a value, not an absent one: it wins over the
// file (HUBPROXY_ADMIN_LISTEN= turns the admin API off).
func TestEmptyVariableIsAValue(t *testing.T) {
	l, err := loadWith(t, "admin-listen: unix:///tmp/from-file.sock\n", map[string]string{"HUBPROXY_ADMIN_LISTEN": ""})
	if err != nil {
		t.Fatal(err)
	}
	if l.cfg.AdminListen != "" || l.sources["admin-listen"] != (source{"env", "HUBPROXY_ADMIN_LISTEN"}) {
		t.Errorf("admin-listen = %q from %s, want \"\" from env HUBPROXY_ADMIN_LISTEN", l.cfg.AdminListen, l.sources["admin-listen"])
	}
}
