package main

import (
	"os"
	"path/filepath"
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
