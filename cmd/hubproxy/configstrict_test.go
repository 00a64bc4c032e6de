package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// loadWith loads the configuration from args, the given variables and, if
// file is not empty, a config file with that YAML.
func loadWith(t *testing.T, file string, env map[string]string, args ...string) (loaded, error) {
	t.Helper()
	if file != "" {
		p := filepath.Join(t.TempDir(), "hubproxy.yaml")
		if err := os.WriteFile(p, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("HUBPROXY_CONFIG", p)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return loaded{}, err
	}
	return load(fs)
}

// A list parses the same from a flag, a variable and the file: several
// entries, never one entry holding the commas.
func TestListsParseTheSameEverywhere(t *testing.T) {
	want := []string{"hf.co", "huggingface.co"}
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		args []string
	}{
		"flag":        {args: []string{"--redirect-hosts", "hf.co,huggingface.co"}},
		"env":         {env: map[string]string{"HUBPROXY_REDIRECT_HOSTS": "hf.co, huggingface.co"}},
		"file list":   {file: "redirect-hosts: [hf.co, huggingface.co]\n"},
		"file string": {file: "redirect-hosts: \"hf.co,huggingface.co\"\n"},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := loadWith(t, tc.file, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(l.cfg.RedirectHosts, want) {
				t.Errorf("redirect-hosts = %q, want %q", l.cfg.RedirectHosts, want)
			}
		})
	}
}

// Values that used to be silently wrong are errors at start, naming the key,
// where the value came from and the value itself.
func TestSilentlyWrongValuesAreErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		args []string
		want []string // each must appear in the error
	}{
		"duration without unit in file": {file: "revision-ttl: 30\n", want: []string{"revision-ttl", "no unit", "30s"}},
		"duration without unit in env":  {env: map[string]string{"HUBPROXY_REVISION_TTL": "30"}, want: []string{"revision-ttl", "HUBPROXY_REVISION_TTL", `"30"`}},
		"days":                          {env: map[string]string{"HUBPROXY_ACCESS_TTL": "1d"}, want: []string{"access-ttl", `"1d"`, "24h"}},
		"yes is not a boolean":          {env: map[string]string{"HUBPROXY_OFFLINE": "yes"}, want: []string{"offline", `"yes"`, "true or false"}},
		"yes in the file":               {file: "offline: yes\n", want: []string{"offline", "yes"}},
		"unknown key":                   {file: "cache_max_bytes: 10GiB\n", want: []string{`"cache_max_bytes"`, `did you mean "cache-max-bytes"`}},
		"typo":                          {file: "upstreem: http://x\n", want: []string{`"upstreem"`, `"upstream"`}},
		"nested unknown key":            {file: "cache:\n  max-bytes: 1Gi\n", want: []string{"unknown keys", `"cache"`}},
		"the file naming a file":        {file: "config: other.yaml\n", want: []string{"unknown keys", `"config"`}},
		"bad size":                      {args: []string{"--cache-max-bytes", "lots"}, want: []string{"cache-max-bytes", "--cache-max-bytes", `"lots"`}},
		"list where one value goes":     {file: "listen: [a, b]\n", want: []string{"listen", "not a single value"}},
		"negative duration":             {args: []string{"--url-ttl", "-5m"}, want: []string{"url-ttl", "negative"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadWith(t, tc.file, tc.env, tc.args...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// Sizes take Kubernetes and IEC spellings alike.
func TestSizesInEveryForm(t *testing.T) {
	l, err := loadWith(t, "cache-max-bytes: 100Gi\nblock-size: 65536\n", map[string]string{"HUBPROXY_CACHE_MIN_FREE_BYTES": "10G"}, "--chunk-size", "8MiB")
	if err != nil {
		t.Fatal(err)
	}
	if l.cfg.CacheMaxBytes != 100<<30 || l.cfg.MinFreeBytes != 10e9 || l.cfg.BlockSize != 64<<10 || l.cfg.ChunkSize != 8<<20 {
		t.Errorf("sizes: %+v", l.cfg)
	}
}

// `hubproxy config` shows every key's value and source, and never a secret.
func TestConfigCommandShowsSources(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hubproxy.yaml")
	os.WriteFile(p, []byte("read-ahead: 7\nrevision-ttl: 1m\n"), 0o644)
	t.Setenv("HUBPROXY_UPSTREAM_TOKEN", "hf_topsecret")
	t.Setenv("HUBPROXY_ACCESS_TTL", "2m")
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"config", "--json", "--config", p, "--listen", ":9999"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "hf_topsecret") {
		t.Fatal("the token was printed")
	}
	var got map[string]configEntry
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for key, want := range map[string]configEntry{
		"listen":          {":9999", "flag --listen"},
		"access-ttl":      {"2m", "env HUBPROXY_ACCESS_TTL"},
		"read-ahead":      {"7", "file " + p},
		"revision-ttl":    {"1m", "file " + p},
		"upstream":        {"https://huggingface.co", "default"},
		"upstream-token":  {"(set, hidden)", "env HUBPROXY_UPSTREAM_TOKEN"},
		"cache-max-bytes": {"100GiB", "default"},
	} {
		if got[key] != want {
			t.Errorf("%s = %+v, want %+v", key, got[key], want)
		}
	}
	if len(got) != len(configKeys()) {
		t.Errorf("%d keys printed, want %d", len(got), len(configKeys()))
	}
}

// Every key documented in configs/hubproxy.yaml is a key the binary knows,
// and the other way round; the file itself loads.
func TestConfigFileDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../configs/hubproxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, err := loadWith(t, string(b), nil)
	if err != nil {
		t.Fatalf("configs/hubproxy.yaml does not load: %v", err)
	}
	for _, k := range configKeys() {
		if l.sources[k.name].kind != "file" {
			t.Errorf("configs/hubproxy.yaml does not document %q", k.name)
		}
	}
	if l.cfg.RevisionTTL != 30*time.Second {
		t.Errorf("revision-ttl from the file = %s", l.cfg.RevisionTTL)
	}
}
