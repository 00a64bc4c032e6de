package s3api

import (
	"errors"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

func TestParseBucket(t *testing.T) {
	for bucket, want := range map[string]hub.RepoType{"models": hub.Model, "datasets": hub.Dataset} {
		got, err := ParseBucket(bucket)
		if err != nil || got != want {
			t.Errorf("ParseBucket(%q) = %q, %v; want %q", bucket, got, err, want)
		}
	}
	for _, bucket := range []string{"", "spaces", "Models", "model", "models/x"} {
		_, err := ParseBucket(bucket)
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Code != "NoSuchBucket" {
			t.Errorf("ParseBucket(%q) error = %v; want NoSuchBucket", bucket, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	good := []struct {
		key, repo, rev, path string
	}{
		{"meta-llama/Llama-3.1-8B/config.json", "meta-llama/Llama-3.1-8B", "main", "config.json"},
		{"org/m/sub/dir/model-00001-of-00002.safetensors", "org/m", "main", "sub/dir/model-00001-of-00002.safetensors"},
		{"org/m@v1.0/a.bin", "org/m", "v1.0", "a.bin"},
		{"org/m@refs%2Fpr%2F1/a.bin", "org/m", "refs/pr/1", "a.bin"},
		{"org/m@0123456789abcdef0123456789abcdef01234567/a.bin", "org/m", "0123456789abcdef0123456789abcdef01234567", "a.bin"},
		// git allows "@" inside a ref name; only the first "@" ends the repo name.
		{"org/m@rel@2/a.bin", "org/m", "rel@2", "a.bin"},
		{"org/m/with space/é.txt", "org/m", "main", "with space/é.txt"},
	}
	for _, c := range good {
		loc, err := ParseKey(hub.Model, c.key)
		if err != nil {
			t.Errorf("ParseKey(%q): %v", c.key, err)
			continue
		}
		if loc.Repo.ID() != c.repo || loc.Repo.Type() != hub.Model || loc.Revision != c.rev || loc.Path != c.path {
			t.Errorf("ParseKey(%q) = %s@%s/%s; want %s@%s/%s", c.key, loc.Repo, loc.Revision, loc.Path, c.repo, c.rev, c.path)
		}
	}
	bad := []string{
		"",
		"org",
		"org/m",
		"org/m/",
		"org/m@/a.bin",
		"org/m@v1/",
		"org/m/../../etc/passwd",
		"org/m/a/./b",
		"org/m/a//b",
		"org/m@..%2Fx/a.bin",
		"org/m@refs%2Gpr/a.bin",
		"../m/a.bin",
		"org/m--x/a.bin",
		"org/m/a\\b",
		"org/m/a\x00b",
	}
	for _, key := range bad {
		loc, err := ParseKey(hub.Model, key)
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Code != "InvalidArgument" {
			t.Errorf("ParseKey(%q) = %+v, %v; want InvalidArgument", key, loc, err)
		}
	}
}
